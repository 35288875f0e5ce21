module github.com/fdbqueue/fdbqueue

go 1.24.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/tidwall/btree v1.8.2
	go.opentelemetry.io/otel v1.41.0
	go.opentelemetry.io/otel/metric v1.41.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
