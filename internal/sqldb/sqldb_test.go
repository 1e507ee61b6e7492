package sqldb_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/sqldb"
)

// TestMySQLConfigOverridesTheDSN: the settings the guarantees rely on win
// over whatever the DSN says.
func TestMySQLConfigOverridesTheDSN(t *testing.T) {
	cfg, err := sqldb.MySQLConfig("u:p@tcp(db:3306)/paycb?clientFoundRows=true&parseTime=false&loc=Local&sql_mode=%27%27")
	require.NoError(t, err)
	assert.False(t, cfg.ClientFoundRows, "affected rows must count changed rows: the claim upsert reads inserts from them")
	assert.True(t, cfg.ParseTime)
	assert.Equal(t, time.UTC, cfg.Loc)
	assert.Equal(t, "'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'", cfg.Params["sql_mode"])
	assert.Equal(t, "'+00:00'", cfg.Params["time_zone"])
}

// TestMySQLConfigHidesTheDSN: a DSN that does not parse is refused without
// quoting it (it carries a password).
func TestMySQLConfigHidesTheDSN(t *testing.T) {
	_, err := sqldb.MySQLConfig("u:secret@tcp(db:3306/paycb")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret")
}
