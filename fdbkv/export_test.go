package fdbkv

// Unexported pure-Go logic, exported to the black-box tests in fdbkv_test.
// None of these call into libfdb_c, so their tests run even against the
// compile-only stub library.
var (
	TranslateError  = translateError
	BindingError    = bindingError
	CommitError     = commitError
	WatchError      = watchError
	ClipOver        = clipOver
	ClipTo          = clipTo
	ErrorCode       = errorCode
	RangeOptions    = rangeOptions
	OptionMillis    = optionMillis
	TimeoutMillis   = timeoutMillis
	RetryLimitValue = retryLimitValue
	InvalidLimit    = invalidLimit
	WrapHandle      = wrapTransaction
)
