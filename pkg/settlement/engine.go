package settlement

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/uptrace/bun"
)

// engine is what the settlement learns once about the MySQL-compatible
// server behind its pool, from SELECT VERSION().
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

// isTiDB reports whether a VERSION() string is TiDB's (for example
// "8.0.11-TiDB-v8.5.0").
func isTiDB(version string) bool { return strings.Contains(version, "TiDB") }

// onTiDB reports whether the server is TiDB, asking it on the first call
// (a failed question is asked again next time). SQLite: false.
func (s *Service) onTiDB(ctx context.Context) (bool, error) {
	if s.sqlite {
		return false, nil
	}
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if !s.engine.known {
		tidb, err := probeTiDB(ctx, s.db)
		if err != nil {
			return false, err
		}
		s.engine.tidb, s.engine.known = tidb, true
	}
	return s.engine.tidb, nil
}

// probeTiDB asks db's server for its version.
func probeTiDB(ctx context.Context, db bun.IDB) (bool, error) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return false, fmt.Errorf("read server version: %w", err)
	}
	return isTiDB(version), nil
}
