package alipay

import (
	pempkg "encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// specReadAnswer is Spec.ReadQueryAnswer. Alipay keys its answers by
// application, and neither a query message nor an answer names the
// application the request was sent for (the credentials chose it): the
// answer is verified with each configured ALIPAY key in turn, and the
// application of the one that verifies it is the answer's AppID, which the
// merchant binding then checks as it checks a callback's app_id. With no
// ALIPAY key an answer is unauthenticated. An HTTP status other than 200
// is read unverified, as ReadAnswer reads it: it never proves an event.
// now is unused: Alipay's answers carry no timestamp to judge.
func specReadAnswer(target channels.QueryTarget, resp channels.QueryResponse, keys channels.ChannelPublicKeys, _ time.Time) (channels.QueryAnswer, error) {
	if resp.StatusCode != 0 && resp.StatusCode != http.StatusOK {
		return DecodeAnswer(target, resp)
	}
	var pubs []PublicKey
	for _, k := range keys.Of(Code) {
		if pk, ok := k.(PublicKey); ok {
			pubs = append(pubs, pk)
		}
	}
	if len(pubs) == 0 {
		return channels.QueryAnswer{}, channels.Errorf(channels.KindUnauthenticated,
			"alipay query answer: no ALIPAY public key is configured (PAYCB_CHANNEL_PUBLIC_KEYS_FILE)")
	}
	var errs []error
	for _, pk := range pubs {
		err := VerifyAnswer(target.Kind, resp.Body, pk)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ans, err := DecodeAnswer(target, resp)
		if err != nil {
			return channels.QueryAnswer{}, err
		}
		ans.AppID = pk.AppID
		return ans, nil
	}
	return channels.QueryAnswer{}, channels.Errorf(channels.KindUnauthenticated,
		"alipay query answer verifies with none of the %d configured ALIPAY keys: %w", len(pubs), errors.Join(errs...))
}

// specParsePublicKey is Spec.ParsePublicKey: an entry {channel: ALIPAY,
// app_id, public_key_file} (ParsePublicKey); merchant_id and key_id are
// refused, since Alipay's key is the application's.
func specParsePublicKey(e channels.PublicKeyEntry, pem []byte) (any, error) {
	if e.MerchantID != "" || e.KeyID != "" {
		return nil, fmt.Errorf("alipay public key: an ALIPAY entry names its app_id only, not merchant_id or key_id")
	}
	if err := channels.CheckID("alipay public key app_id", e.AppID); err != nil {
		return nil, err
	}
	key, err := ParsePublicKey(pem)
	if err != nil {
		return nil, fmt.Errorf("alipay public key of app %s: %w", channels.Quote(e.AppID), err)
	}
	pk := PublicKey{AppID: e.AppID, PublicKeyFile: e.PublicKeyFile, Key: key}
	if block, _ := pempkg.Decode(pem); block != nil && block.Type == "CERTIFICATE" {
		if pk.CertSN, err = CertSN(pem); err != nil {
			return nil, fmt.Errorf("alipay public key of app %s: %w", channels.Quote(e.AppID), err)
		}
	}
	return pk, nil
}
