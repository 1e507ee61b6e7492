package fakechannel

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"sync"

	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// The test merchant every fake knows, by channel.
const (
	// WeChatMerchantID is the test merchant's mchid: the sample answers'.
	WeChatMerchantID = wechat.SampleMerchantID
	// WeChatSerialNo is the serial of the test merchant's API
	// certificate (the Authorization serial_no).
	WeChatSerialNo = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
	// WeChatPlatformKeyID is the Wechatpay-Serial of the fake's answers:
	// a platform public-key id.
	WeChatPlatformKeyID = "PUB_KEY_ID_0112300001092024060100000000000000"
	// AlipayMerchantID is the test merchant's PID.
	AlipayMerchantID = "2088101122136241"
	// AlipayAppID is the test application's app_id.
	AlipayAppID = "2021000000000000"
	// SQBTerminalSN is the test terminal: the sample callbacks'.
	SQBTerminalSN = "01939202039923029"
	// SQBTerminalKey is the test terminal's key.
	SQBTerminalKey = "e3b0c44298fc1c149afbf4c8996fb924"
)

// Keys are the test RSA keys: Merchant signs requests (the WeChat
// merchant API key, the Alipay application key), the fakes check them with
// its public half; Platform signs the fakes' answers (WeChat Pay's
// platform key, Alipay's key), the readers check them with its public
// half; Other is a key nobody configured, for forged requests and answers.
type Keys struct {
	Merchant *rsa.PrivateKey
	Platform *rsa.PrivateKey
	Other    *rsa.PrivateKey
}

var (
	sharedOnce sync.Once
	sharedKeys *Keys
	sharedErr  error
)

// SharedKeys returns the process's test keys, generated once (2048-bit
// RSA takes a while under the race detector). Callers must not change
// them.
func SharedKeys() (*Keys, error) {
	sharedOnce.Do(func() { sharedKeys, sharedErr = NewKeys() })
	return sharedKeys, sharedErr
}

// NewKeys generates fresh 2048-bit test keys.
func NewKeys() (*Keys, error) {
	var ks [3]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("generate test key: %w", err)
		}
		ks[i] = k
	}
	return &Keys{Merchant: ks[0], Platform: ks[1], Other: ks[2]}, nil
}

// WeChatCredentials are the test merchant's WeChat credentials for
// tenant, signing with key (k.Merchant; k.Other makes requests the fake
// refuses).
func (k *Keys) WeChatCredentials(tenantID int64, key *rsa.PrivateKey) wechat.Credentials {
	return wechat.Credentials{TenantID: tenantID, MerchantID: WeChatMerchantID, SerialNo: WeChatSerialNo, PrivateKey: key}
}

// WeChatPublicKeys are the keys the fake WeChat's answers verify with.
func (k *Keys) WeChatPublicKeys() []wechat.PublicKey {
	return []wechat.PublicKey{{MerchantID: WeChatMerchantID, KeyID: WeChatPlatformKeyID, Key: &k.Platform.PublicKey}}
}

// AlipayCredentials are the test application's credentials for tenant,
// signing with key.
func (k *Keys) AlipayCredentials(tenantID int64, key *rsa.PrivateKey) alipay.Credentials {
	return alipay.Credentials{TenantID: tenantID, MerchantID: AlipayMerchantID, AppID: AlipayAppID, PrivateKey: key}
}

// AlipayPublicKey is the key the fake Alipay's answers verify with.
func (k *Keys) AlipayPublicKey() alipay.PublicKey {
	return alipay.PublicKey{AppID: AlipayAppID, Key: &k.Platform.PublicKey}
}

// SQBCredentials are the test terminal's credentials for tenant with
// terminal key key (SQBTerminalKey is the one the fake accepts).
func SQBCredentials(tenantID int64, key string) sqb.Credentials {
	return sqb.Credentials{TenantID: tenantID, MerchantID: SQBTerminalSN, TerminalKey: key}
}

// PrivateKeyPEM is key as PKCS#8 PEM ("PRIVATE KEY"), as the channels
// issue merchant keys.
func PrivateKeyPEM(key *rsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(fmt.Sprintf("marshal test key: %v", err)) // an RSA key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// PublicKeyPEM is key as PKIX PEM ("PUBLIC KEY").
func PublicKeyPEM(key *rsa.PublicKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		panic(fmt.Sprintf("marshal test public key: %v", err)) // an RSA key always marshals
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}
