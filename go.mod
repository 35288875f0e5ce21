module github.com/fdbqueue/fdbqueue

go 1.24.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/tidwall/btree v1.8.2
)

require go.yaml.in/yaml/v3 v3.0.5 // indirect
