package wechat

import (
	"fmt"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
)

// AnswerHeaders are the answer headers VerifyAnswer reads: those a query
// message carries for WeChat (Spec.QueryAnswerHeaders).
var AnswerHeaders = []string{HeaderTimestamp, HeaderNonce, HeaderSignature, HeaderSerial, HeaderSignatureType}

// specReadAnswer is Spec.ReadQueryAnswer: ReadAnswer with the WeChat keys
// of keys, the answer's timestamp judged at now.
func specReadAnswer(target channels.QueryTarget, resp channels.QueryResponse, keys channels.ChannelPublicKeys, now time.Time) (channels.QueryAnswer, error) {
	var pubs []PublicKey
	for _, k := range keys.Of(Code) {
		if pk, ok := k.(PublicKey); ok {
			pubs = append(pubs, pk)
		}
	}
	return ReadAnswer(target, resp, pubs, now)
}

// specParsePublicKey is Spec.ParsePublicKey: an entry {channel: WECHAT,
// merchant_id, key_id, public_key_file} (NewPublicKey); app_id is refused.
func specParsePublicKey(e channels.PublicKeyEntry, pem []byte) (any, error) {
	if e.AppID != "" {
		return nil, fmt.Errorf("wechat public key: app_id is not a field of a WECHAT entry (merchant_id and key_id are)")
	}
	return NewPublicKey(e.MerchantID, e.KeyID, pem)
}
