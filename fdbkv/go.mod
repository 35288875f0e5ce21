module github.com/fdbqueue/fdbqueue/fdbkv

go 1.24.0

require (
	github.com/apple/foundationdb/bindings/go v0.0.0-20260629183922-51e1c42eb9a8
	github.com/fdbqueue/fdbqueue v0.1.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	go.opentelemetry.io/otel v1.41.0 // indirect
	go.opentelemetry.io/otel/metric v1.41.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

// Local work builds against the root module in the parent directory; a
// consumer ignores this replace and gets the tagged version required above.
replace github.com/fdbqueue/fdbqueue => ../
