package fdbqueue

// Test seams for the declared retention (journal.declare), visible only
// to this package's tests.

// SetJournalExpiryEvery makes l's journal expire old records once every
// n operations instead of every 64, from shard 0 on: a sweep of every
// shard then takes 16n operations.
func SetJournalExpiryEvery[L journaled](l L, n uint64) {
	j := journalOf(l)
	j.gcEvery = n
	j.count.Store(0)
	j.gcShard.Store(0)
}

// PrimeExpiry makes l's next operation expire old records, starting with
// shards 0 to 15.
func PrimeExpiry[L journaled](l L) {
	j := journalOf(l)
	j.count.Store(j.gcEvery - 1)
	j.gcShard.Store(0)
}

// JournalDeclaredKey returns the key where l's queue keeps the largest
// retention its handles declared.
func JournalDeclaredKey[L journaled](l L) []byte { return journalOf(l).declKey }
