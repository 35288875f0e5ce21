// Package otelcheck holds the test of fdbqueue's OpenTelemetry metrics
// against the OpenTelemetry SDK's in-memory reader. It lives in the tools
// module so that the SDK stays out of the library's module graph (the
// library depends only on the metric API).
package otelcheck
