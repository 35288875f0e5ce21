package memdb

// SetAwaitingReads makes every Commit on db that is about to wait for
// reads in flight call f first (without the transaction's lock), so that a
// test acts while the commit waits. Set it before the transactions start.
func (db *DB) SetAwaitingReads(f func()) { db.awaitingReads = f }

// SetSleeping makes every read, read version request, commit and OnError
// on db that is about to wait out a delay call f first (without the
// transaction's lock). Set it before the transactions start.
func (db *DB) SetSleeping(f func()) { db.sleeping = f }

// SetBackingOff makes every OnError on db that is about to wait out its
// backoff call f first (without the transaction's lock), so that a test
// acts during the backoff. Set it before the transactions start.
func (db *DB) SetBackingOff(f func()) { db.backingOff = f }
