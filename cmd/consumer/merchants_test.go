package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunRefusesAMerchantBindingOfOneMerchantToTwoTenants: a binding that
// gives one merchant to two tenants stops run at start with exit 2,
// naming both lines, before anything is dialled; a good one does not stop
// it there (the unreachable database does, later).
func TestRunRefusesAMerchantBindingOfOneMerchantToTwoTenants(t *testing.T) {
	bad := writeMerchants(t, "1001 SQB 100000000000000001\n# a till moved\n2002 SQB 100000000000000001\n")
	vars := map[string]string{"PAYCB_DB_DSN": "u:p@tcp(127.0.0.1:1)/x", "PAYCB_TENANT_MERCHANTS_FILE": bad}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"run"}, &out, &errOut, lookupIn(vars))
	require.Error(t, err)
	assert.Equal(t, exitUsage, exitCode(err), "%v", err)
	require.ErrorContains(t, err, "line 3: SQB merchant 100000000000000001 is bound to tenant 2002, but line 1 binds it to tenant 1001")
	assert.NotContains(t, err.Error()+errOut.String(), "u:p@", "the DSN password is never printed")

	vars["PAYCB_TENANT_MERCHANTS_FILE"] = writeMerchants(t, "1001 SQB 100000000000000001\n")
	vars["PAYCB_STARTUP_TIMEOUT"] = "1s"
	vars["PAYCB_CHANNELS"] = "SQB"
	vars["PAYCB_ADMIN_ADDR"] = "127.0.0.1:0"
	err = run(context.Background(), []string{"run"}, &out, &errOut, lookupIn(vars))
	require.Error(t, err)
	assert.Equal(t, exitFailure, exitCode(err), "a good binding passes; the database is what fails: %v", err)
}
