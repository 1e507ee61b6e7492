package merchantbinding

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/paycallback/paycallback/pkg/channels"
)

func TestParse(t *testing.T) {
	t.Run("several merchants per tenant and channel", func(t *testing.T) {
		b, err := Parse([]byte("# tenant 1001: two terminals and a sub-merchant\n" +
			"1001 SQB 100000000000000001\n1001\tSQB  100000000000000002 # the second till\n\n" +
			"1001 WECHAT 1900000109\r\n2002 ALIPAY 2088000000000000\n1001 SQB 100000000000000001\n"))
		require.NoError(t, err)
		assert.Equal(t, 4, b.Len(), "a repeated line binds once")
		for _, tt := range []struct {
			ch       channels.Channel
			merchant string
			tenant   int64
			ok       bool
		}{
			{channels.SQB, "100000000000000001", 1001, true},
			{channels.SQB, "100000000000000002", 1001, true},
			{channels.WeChat, "1900000109", 1001, true},
			{channels.Alipay, "2088000000000000", 2002, true},
			{channels.WeChat, "2088000000000000", 0, false}, // bound for another channel only
			{channels.SQB, "100000000000000003", 0, false},
		} {
			tenant, ok := b.TenantOf(tt.ch, tt.merchant)
			assert.Equal(t, tt.ok, ok, "%s %s", tt.ch, tt.merchant)
			assert.Equal(t, tt.tenant, tenant, "%s %s", tt.ch, tt.merchant)
		}
		assert.Equal(t, []string{"100000000000000001", "100000000000000002"}, b.Merchants(1001, channels.SQB))
		assert.Equal(t, []int64{1001, 2002}, b.Tenants())
	})
	t.Run("bad lines are named", func(t *testing.T) {
		_, err := Parse([]byte("1001 WECHAT\nx WECHAT 1\n1001 PAYPAL 1\n1001 WECHAT 1900000109\n" +
			"2002 WECHAT 1900000109\n1001 ALIPAY [2088]\n"))
		require.Error(t, err)
		for _, want := range []string{
			"line 1: want TENANT_ID CHANNEL MERCHANT_ID or TENANT_ID CHANNEL APP_FIELD APP_ID, got 2 fields",
			`line 2: tenant ID "x" is not a positive integer`,
			`line 3: channel "PAYPAL" is not WECHAT, ALIPAY or SQB`,
			"line 5: WECHAT merchant 1900000109 is bound to tenant 2002, but line 4 binds it to tenant 1001: a merchant belongs to one tenant",
			"line 6: merchant ID",
		} {
			assert.Contains(t, err.Error(), want)
		}
	})
	t.Run("a tenant's applications", func(t *testing.T) {
		b, err := Parse([]byte("1001 ALIPAY 2088000000000000\n1001 ALIPAY app_id 2021000000000001\n" +
			"1001 ALIPAY app_id 2021000000000002\n2002 ALIPAY app_id 2021000000000002 # a service provider's app serves both\n" +
			"1001 ALIPAY app_id 2021000000000001\n"))
		require.NoError(t, err)
		assert.Equal(t, 4, b.Len(), "a repeated line binds once")
		assert.Equal(t, []string{"2021000000000001", "2021000000000002"}, b.Apps(1001, channels.Alipay))
		assert.True(t, b.AppAllowed(1001, channels.Alipay, "2021000000000001"))
		assert.True(t, b.AppAllowed(2002, channels.Alipay, "2021000000000002"))
		assert.False(t, b.AppAllowed(2002, channels.Alipay, "2021000000000001"), "tenant 1001's app is not 2002's")
		assert.False(t, b.AppAllowed(1001, channels.Alipay, ""), "a callback naming no app is of none of the tenant's")
		assert.True(t, b.AppAllowed(3003, channels.Alipay, "2021000000000009"), "a tenant with no app bound is not checked by app")
		assert.True(t, b.AppAllowed(1001, channels.WeChat, "wx0000"), "nor on another channel")
		assert.Equal(t, []int64{1001, 2002}, b.Tenants())
	})
	t.Run("an application on a channel without one, or misnamed", func(t *testing.T) {
		_, err := Parse([]byte("1001 WECHAT appid wx8888888888888888\n1001 ALIPAY appid 2021000000000001\n1001 ALIPAY app_id [2021]\n"))
		require.Error(t, err)
		for _, want := range []string{
			"line 1: WECHAT callbacks name no application: want TENANT_ID WECHAT MERCHANT_ID",
			`line 2: "appid" is not app_id: want TENANT_ID ALIPAY app_id APP_ID`,
			"line 3: app_id ",
		} {
			assert.Contains(t, err.Error(), want)
		}
	})
	t.Run("one merchant ID in two channels is two merchants", func(t *testing.T) {
		b, err := Parse([]byte("1001 WECHAT 123\n2002 SQB 123\n"))
		require.NoError(t, err)
		tenant, ok := b.TenantOf(channels.SQB, "123")
		require.True(t, ok)
		assert.Equal(t, int64(2002), tenant)
	})
}
