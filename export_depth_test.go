package fdbqueue

// SetRepairPage makes RepairDepth read pages of n keys; the returned
// function restores the default.
func SetRepairPage(n int) (restore func()) {
	old := repairPage
	repairPage = n
	return func() { repairPage = old }
}
