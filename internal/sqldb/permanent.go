package sqldb

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// permanentErrors are the server's answers to a connection or a first
// statement that waiting will not change: the credentials, the database
// name or the grants are wrong, and only an operator can fix them.
var permanentErrors = map[uint16]string{
	1044: "access to the database denied",          // ER_DBACCESS_DENIED_ERROR
	1045: "access denied: wrong user or password",  // ER_ACCESS_DENIED_ERROR
	1049: "unknown database",                       // ER_BAD_DB_ERROR
	1130: "this host may not connect as this user", // ER_HOST_NOT_PRIVILEGED
	1142: "a table privilege is missing",           // ER_TABLEACCESS_DENIED_ERROR
	1143: "a column privilege is missing",          // ER_COLUMNACCESS_DENIED_ERROR
	// ER_ACCESS_DENIED_NO_PASSWORD_ERROR: the server authenticates the
	// user another way (Debian's root@localhost: by unix socket).
	1698: "access denied: the server authenticates this user another way (for example by unix socket)",
}

// Permanent returns a readable reason and true when err carries a server
// error that waiting will not heal (access denied, unknown database, a
// missing privilege: MySQL error numbers 1044, 1045, 1049, 1130, 1142, 1143
// and 1698). Network errors, too many connections (1040), lock wait
// timeouts (1205) and every other error are false: they may pass.
func Permanent(err error) (string, bool) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return "", false
	}
	reason, ok := permanentErrors[me.Number]
	return reason, ok
}

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
