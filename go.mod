module github.com/fdbqueue/fdbqueue

go 1.24

require (
	github.com/anishathalye/porcupine v1.3.1 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
