module github.com/fdbqueue/fdbqueue/tools

go 1.24.0

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/fdbqueue/fdbqueue v0.1.0
	github.com/fdbqueue/fdbqueue/fdbkv v0.1.0
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel v1.41.0
	go.opentelemetry.io/otel/exporters/stdout/stdoutmetric v1.41.0
	go.opentelemetry.io/otel/sdk/metric v1.41.0
	golang.org/x/mod v0.33.0
	gonum.org/v1/plot v0.17.0
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/apple/foundationdb/bindings/go v0.0.0-20260629183922-51e1c42eb9a8 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/tidwall/btree v1.8.2 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/metric v1.41.0 // indirect
	go.opentelemetry.io/otel/sdk v1.41.0 // indirect
	go.opentelemetry.io/otel/trace v1.41.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/image v0.30.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/text v0.28.0 // indirect
)

// Local work builds against the modules in this repository; a consumer
// ignores these replaces and gets the tagged versions required above.
replace (
	github.com/fdbqueue/fdbqueue => ../
	github.com/fdbqueue/fdbqueue/fdbkv => ../fdbkv
)
