package settlement

import (
	"context"
	"sync"

	"github.com/paycallback/paycallback/pkg/dbengine"
)

// engine is what the settlement learns once about the MySQL-compatible
// server behind its pool, from dbengine.Detect: by what the server is,
// never by its VERSION(), which TiDB's server-version setting makes look
// like MySQL's.
type engine struct {
	mu    sync.Mutex
	known bool
	// tidb: the server is TiDB, which differs from MySQL and MariaDB in
	// two ways the batch depends on. It accepts SELECT … FOR UPDATE SKIP
	// LOCKED but neither skips nor waits: it returns a row another
	// transaction holds, as last committed, without locking it, a read no
	// decision may rest on; so its locking reads are plain FOR UPDATE,
	// which waits for a busy order row (in optimistic mode it takes no
	// lock before COMMIT, which then fails with a write conflict if the
	// row changed). And an UPDATE locks only the rows it writes, where
	// InnoDB locks every row a multi-table UPDATE reads.
	tidb bool
}

// onTiDB reports whether the server is TiDB, asking it on the first call
// (a failed question is an error, and is asked again next time: never a
// guess). SQLite: false.
func (s *Service) onTiDB(ctx context.Context) (bool, error) {
	if s.sqlite {
		return false, nil
	}
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if !s.engine.known {
		info, err := dbengine.Detect(ctx, s.db)
		if err != nil {
			return false, err
		}
		s.engine.tidb, s.engine.known = info.Engine == dbengine.TiDB, true
	}
	return s.engine.tidb, nil
}
