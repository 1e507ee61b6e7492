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
	// skipLocked: the server honours SELECT … FOR UPDATE SKIP LOCKED.
	// MySQL 8 and MariaDB 10.6+ do. TiDB accepts the clause but neither
	// skips nor waits: it returns a row another transaction holds, as
	// last committed, without locking it, a read no decision may rest on.
	// So on TiDB a batch's locking reads are plain FOR UPDATE, which waits
	// for a busy order row (in optimistic mode it takes no lock before
	// COMMIT, which then fails with a write conflict if the row changed).
	skipLocked bool
}

// isTiDB reports whether a VERSION() string is TiDB's (for example
// "8.0.11-TiDB-v8.5.0").
func isTiDB(version string) bool { return strings.Contains(version, "TiDB") }

// canSkipLocked reports whether the server skips rows that another
// transaction holds on SELECT … FOR UPDATE SKIP LOCKED, asking it on the
// first call (a failed question is asked again next time). SQLite needs
// no locking read at all: false.
func (s *Service) canSkipLocked(ctx context.Context) (bool, error) {
	if s.sqlite {
		return false, nil
	}
	s.engine.mu.Lock()
	defer s.engine.mu.Unlock()
	if !s.engine.known {
		skip, err := probeSkipLocked(ctx, s.db)
		if err != nil {
			return false, err
		}
		s.engine.skipLocked, s.engine.known = skip, true
	}
	return s.engine.skipLocked, nil
}

// probeSkipLocked asks db's server for its version.
func probeSkipLocked(ctx context.Context, db bun.IDB) (bool, error) {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return false, fmt.Errorf("read server version: %w", err)
	}
	return !isTiDB(version), nil
}
