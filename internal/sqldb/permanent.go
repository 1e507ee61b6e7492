package sqldb

import (
	"fmt"

	"github.com/paycallback/paycallback/pkg/dberr"
)

// Permanent is dberr.Permanent: a readable reason and true when err
// carries a server error that waiting will not heal (access denied, unknown
// database, a missing privilege).
func Permanent(err error) (string, bool) { return dberr.Permanent(err) }

// PermanentError wraps err, when Permanent says waiting will not heal it,
// into one line that names what is wrong and the setting to fix,
// PAYCB_DB_DSN, shown as dsn (config.DSN's String, its password masked);
// other errors come back unchanged.
func PermanentError(dsn fmt.Stringer, err error) error {
	reason, ok := Permanent(err)
	if !ok {
		return err
	}
	return fmt.Errorf("%s: fix PAYCB_DB_DSN (%s); waiting will not heal it: %w", reason, dsn, err)
}
