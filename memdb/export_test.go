package memdb

// SetAwaitingReads makes every Commit on db that is about to wait for
// reads in flight call f first (without the transaction's lock), so that a
// test acts while the commit waits. Set it before the transactions start.
func (db *DB) SetAwaitingReads(f func()) { db.awaitingReads = f }

// SetSleeping makes every read and read version request on db that is
// about to wait out its latency call f first (without the transaction's
// lock). Set it before the transactions start.
func (db *DB) SetSleeping(f func()) { db.sleeping = f }
