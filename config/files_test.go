package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/statementauth"
)

// files checks the files a Config names as the worker does
// (internal/app.FileChecks, which imports this package).
var files = FileChecks{
	StatementKeys: func(path string) error {
		_, err := statementauth.Load(path)
		return err
	},
	MerchantBinding: func(path string) error {
		_, err := merchantbinding.Load(path)
		return err
	},
	ChannelPublicKeys: func(path string) error {
		_, err := channelkeys.Load(path)
		return err
	},
}

// TestChannelPublicKeysFileSetting: PAYCB_CHANNEL_PUBLIC_KEYS_FILE names
// the keys file, which Validate reads through its check: an unknown field
// is ErrInvalid (exit 2), naming the setting.
func TestChannelPublicKeysFileSetting(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "[]\n")
	bad := writeFile(t, dir, "bad.yaml", "- {channel: ALIPAY, app_id: \"2021\", public_key_file: k.pem, serial: X}\n")
	c, err := Load(nil, envMap(map[string]string{"PAYCB_CHANNEL_PUBLIC_KEYS_FILE": good}))
	require.NoError(t, err)
	require.NoError(t, c.Validate(files))
	assert.Equal(t, good, c.Worker.ChannelPublicKeysFile)

	c, err = Load(nil, envMap(map[string]string{"PAYCB_CHANNEL_PUBLIC_KEYS_FILE": bad}))
	require.NoError(t, err)
	err = c.Validate(files)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "worker.channel_public_keys_file (PAYCB_CHANNEL_PUBLIC_KEYS_FILE)")
	assert.Contains(t, err.Error(), "field serial not found")
}

func TestTenantMerchantsFileSetting(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good", "1001 WECHAT 1900000109\n")
	bad := writeFile(t, dir, "bad", "1001 WECHAT 1900000109\n2002 WECHAT 1900000109\n")

	c, err := Load(nil, envMap(map[string]string{"PAYCB_TENANT_MERCHANTS_FILE": good}))
	require.NoError(t, err)
	require.NoError(t, c.Validate(files))
	assert.Equal(t, good, c.Worker.TenantMerchantsFile)
	assert.Contains(t, c.String(), "worker.tenant_merchants_file="+good, "a path, printed as it is")

	cfgFile := writeFile(t, dir, "c.yaml", "worker:\n  tenant_merchants_file: "+bad+"\n")
	c, err = Load(parseFlags(t, "--config", cfgFile), nil)
	require.NoError(t, err)
	err = c.Validate(files)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "PAYCB_TENANT_MERCHANTS_FILE")
	assert.Contains(t, err.Error(), "line 2: WECHAT merchant 1900000109 is bound to tenant 2002, but line 1 binds it to tenant 1001")

	c, err = Load(nil, envMap(map[string]string{"PAYCB_TENANT_MERCHANTS_FILE": dir + "/missing"}))
	require.NoError(t, err)
	require.ErrorIs(t, c.Validate(files), ErrInvalid)
}

// TestValidateReadsFilesOnlyThroughChecks: without checks Validate reads no
// file; with them, each file's problem is named by its setting.
func TestValidateReadsFilesOnlyThroughChecks(t *testing.T) {
	c := Default()
	c.Kafka.Brokers = []string{"127.0.0.1:9092"}
	c.Statement.KeyFile = t.TempDir() + "/missing-keys"
	c.Worker.TenantMerchantsFile = t.TempDir() + "/missing-binding"
	c.Finalize()
	require.NoError(t, c.Validate(FileChecks{}))
	err := c.Validate(files)
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "statement.key_file (PAYCB_STATEMENT_KEY_FILE)")
	assert.Contains(t, err.Error(), "worker.tenant_merchants_file (PAYCB_TENANT_MERCHANTS_FILE)")
}
