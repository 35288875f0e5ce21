module github.com/fdbqueue/fdbqueue/fdbkv

go 1.24.0

require (
	github.com/apple/foundationdb/bindings/go v0.0.0-20260629183922-51e1c42eb9a8
	github.com/fdbqueue/fdbqueue v0.0.0-00010101000000-000000000000
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)

replace github.com/fdbqueue/fdbqueue => ../
