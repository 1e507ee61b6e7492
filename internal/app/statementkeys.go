package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/statementauth"
	"github.com/paycallback/paycallback/internal/watchfile"
)

// statementKeys verifies statement events with the keys of
// PAYCB_STATEMENT_KEY_FILE as last read good (watchfile), or refuses every
// one when the file is not configured.
type statementKeys struct {
	file *watchfile.File[statementauth.Keys] // nil: not configured
}

// errNoStatementKeyFile is the reason every statement event is refused
// while PAYCB_STATEMENT_KEY_FILE is unset.
var errNoStatementKeyFile = errors.New("no statement key file is configured (PAYCB_STATEMENT_KEY_FILE): statement events cannot be verified")

// loadStatementKeys reads the statement key file when one is configured; a
// bad file is a configuration error. The secrets are never logged: only the
// path and the key ids.
func loadStatementKeys(cfg config.Config, logger *slog.Logger) (*statementKeys, error) {
	path := cfg.Statement.KeyFile
	if path == "" {
		logger.Warn("no statement key file (PAYCB_STATEMENT_KEY_FILE): every statement event (consumer statement reconcile --publish-missing) is dead-lettered unauthenticated")
		return &statementKeys{}, nil
	}
	f, err := watchfile.Load(path, statementauth.Parse)
	if err != nil {
		return nil, fmt.Errorf("%w: statement.key_file (PAYCB_STATEMENT_KEY_FILE): %w", config.ErrInvalid, err)
	}
	logger.Info("statement keys loaded", "file", path, "keys", f.Current().IDs())
	return &statementKeys{file: f}, nil
}

// Verify implements channels.StatementVerifier with the keys current now.
func (s *statementKeys) Verify(value []byte, signature string) error {
	if s.file == nil {
		return errNoStatementKeyFile
	}
	return s.file.Current().Verify(value, signature)
}

// ids are the key ids in force, current first; nil when not configured.
func (s *statementKeys) ids() []string {
	if s.file == nil {
		return nil
	}
	return s.file.Current().IDs()
}

// watch re-reads the key file until ctx ends, so a rotation needs no
// restart; a file refused keeps the last good keys (watchfile).
func (s *statementKeys) watch(ctx context.Context, logger *slog.Logger) {
	if s.file == nil {
		return
	}
	s.file.Watch(ctx, 0, logger, func(ks statementauth.Keys) {
		logger.Info("statement keys in force", "file", s.file.Path(), "keys", ks.IDs())
	})
}
