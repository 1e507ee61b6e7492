package wechat

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/eventkey"
)

// WeChat Pay v3 notification constants.
const (
	TransactionSuccess = "TRANSACTION.SUCCESS"
	RefundSuccess      = "REFUND.SUCCESS"
	RefundAbnormal     = "REFUND.ABNORMAL"
	RefundClosed       = "REFUND.CLOSED"
	Algorithm          = "AEAD_AES_256_GCM"
	ResourceType       = "encrypt-resource"
)

// wechatNotification is the outer, plaintext v3 notification.
type wechatNotification struct {
	ID           string         `json:"id"`
	CreateTime   string         `json:"create_time"`
	EventType    string         `json:"event_type"`
	ResourceType string         `json:"resource_type"`
	Resource     wechatResource `json:"resource"`
}

type wechatResource struct {
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	Nonce          string `json:"nonce"`
	AssociatedData string `json:"associated_data"`
	OriginalType   string `json:"original_type"`
}

// wechatTransaction is a decrypted transaction, direct or partner mode.
type wechatTransaction struct {
	MchID         string `json:"mchid"`
	SpMchID       string `json:"sp_mchid"`
	SubMchID      string `json:"sub_mchid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	TradeState    string `json:"trade_state"`
	SuccessTime   string `json:"success_time"`
	Amount        struct {
		Total    jsonFen `json:"total"`
		Currency string  `json:"currency"`
	} `json:"amount"`
}

// wechatRefund is a decrypted refund, direct or partner mode.
type wechatRefund struct {
	MchID         string `json:"mchid"`
	SpMchID       string `json:"sp_mchid"`
	SubMchID      string `json:"sub_mchid"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	OutRefundNo   string `json:"out_refund_no"`
	RefundID      string `json:"refund_id"`
	RefundStatus  string `json:"refund_status"`
	Status        string `json:"status"` // the query API's name
	SuccessTime   string `json:"success_time"`
	Amount        struct {
		Total    jsonFen `json:"total"`
		Refund   jsonFen `json:"refund"`
		Currency string  `json:"currency"`
	} `json:"amount"`
}

func decodeWeChat(env channels.Envelope, keys channels.KeyProvider) (channels.Result, error) {
	var n wechatNotification
	if !fastWeChat([]byte(env.Body), &n) {
		n = wechatNotification{}
		if err := channels.Unmarshal([]byte(env.Body), &n, "wechat notification"); err != nil {
			return channels.Result{}, err
		}
	}
	var wantType string
	switch n.EventType {
	case TransactionSuccess:
		wantType = "transaction"
	case RefundSuccess, RefundAbnormal, RefundClosed:
		wantType = "refund"
	case "":
		return channels.Result{}, channels.Errorf(channels.KindMalformed, "wechat notification has no event_type")
	default:
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "wechat event_type %s", channels.Quote(n.EventType))
	}
	if n.ResourceType != "" && n.ResourceType != ResourceType {
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "wechat resource_type %s", channels.Quote(n.ResourceType))
	}
	if ot := n.Resource.OriginalType; ot != "" && ot != wantType {
		return channels.Result{}, channels.Errorf(channels.KindMalformed, "wechat %s carries original_type %s", n.EventType, channels.Quote(ot))
	}
	plain, use, err := decryptWeChat(keys, env.TenantID, &n.Resource)
	if err != nil {
		return channels.Result{}, err
	}
	var res channels.Result
	if wantType == "transaction" {
		res, err = decodeWeChatTransaction(plain, &n)
	} else {
		res, err = decodeWeChatRefund(plain, &n)
	}
	res.APIv3Key = use
	return res, err
}

// decryptWeChat opens the AES-256-GCM resource with the tenant's keys, tried
// in order (the current key first): the first whose authentication tag
// matches decrypts it, and KeyUse says which. It fails with
// KindDecryptFailed only when every key fails, and with KindNoKey when the
// tenant has no key or one of the wrong length. No key ever appears in an
// error.
func decryptWeChat(provider channels.KeyProvider, tenantID int64, r *wechatResource) ([]byte, channels.KeyUse, error) {
	if r.Algorithm != Algorithm {
		if r.Algorithm == "" {
			return nil, channels.KeyUse{}, channels.Errorf(channels.KindMalformed, "wechat resource has no algorithm")
		}
		return nil, channels.KeyUse{}, channels.Errorf(channels.KindUnsupported, "wechat resource algorithm %s", channels.Quote(r.Algorithm))
	}
	if len(r.Nonce) != 12 {
		return nil, channels.KeyUse{}, channels.Errorf(channels.KindMalformed, "wechat resource nonce is %d bytes, want 12", len(r.Nonce))
	}
	if r.Ciphertext == "" {
		return nil, channels.KeyUse{}, channels.Errorf(channels.KindMalformed, "wechat resource has no ciphertext")
	}
	var keys [][]byte
	if provider != nil {
		keys = provider.APIv3Keys(tenantID)
	}
	if len(keys) == 0 {
		return nil, channels.KeyUse{}, channels.Errorf(channels.KindNoKey, "no wechat apiv3 key for tenant %d", tenantID)
	}
	for i, key := range keys {
		if len(key) != channels.APIv3KeyLen {
			return nil, channels.KeyUse{}, channels.Errorf(channels.KindNoKey, "wechat apiv3 key %d of %d for tenant %d is %d bytes, want %d",
				i+1, len(keys), tenantID, len(key), channels.APIv3KeyLen)
		}
	}
	ct, err := base64.StdEncoding.DecodeString(r.Ciphertext)
	if err != nil {
		return nil, channels.KeyUse{}, channels.Errorf(channels.KindMalformed, "wechat resource ciphertext is not base64: %w", err)
	}
	// A failed Open may overwrite its destination, so every key but the
	// last opens into a buffer of its own; the last opens in place.
	var buf []byte
	for i, key := range keys {
		block, err := aes.NewCipher(key)
		if err != nil { // unreachable with a 32-byte key
			return nil, channels.KeyUse{}, channels.Errorf(channels.KindNoKey, "wechat apiv3 key %d of %d for tenant %d: %w", i+1, len(keys), tenantID, err)
		}
		gcm, err := cipher.NewGCM(block)
		if err != nil {
			return nil, channels.KeyUse{}, channels.Errorf(channels.KindDecryptFailed, "wechat gcm: %w", err)
		}
		dst := ct[:0]
		if i < len(keys)-1 {
			if buf == nil {
				buf = make([]byte, 0, len(ct))
			}
			dst = buf[:0]
		}
		plain, err := gcm.Open(dst, []byte(r.Nonce), ct, []byte(r.AssociatedData))
		if err == nil {
			return plain, channels.KeyUse{Position: i + 1, Keys: len(keys)}, nil
		}
	}
	if len(keys) == 1 {
		return nil, channels.KeyUse{}, channels.Errorf(channels.KindDecryptFailed,
			"wechat resource for tenant %d failed authentication (wrong key or associated data)", tenantID)
	}
	return nil, channels.KeyUse{}, channels.Errorf(channels.KindDecryptFailed,
		"wechat resource for tenant %d failed authentication with each of its %d keys (wrong keys or associated data)", tenantID, len(keys))
}

func decodeWeChatTransaction(plain []byte, n *wechatNotification) (res channels.Result, err error) {
	var tx wechatTransaction
	defer func() { res.MerchantID = wechatMerchant(tx.MchID, tx.SubMchID) }()
	if !fastWeChatTransaction(plain, &tx) {
		tx = wechatTransaction{}
		if err := channels.Unmarshal(plain, &tx, "wechat transaction"); err != nil {
			return channels.Result{}, foreignCurrencyFirst(plain, err)
		}
	}
	// The currency comes first: a cross-border transaction names its trade
	// "id", not "transaction_id", and must be refused as the foreign
	// payment it is, not as a malformed one.
	if err := checkWeChatCurrency(tx.Amount.Currency); err != nil {
		return channels.Result{}, err
	}
	if tx.TradeState != "SUCCESS" {
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "wechat %s with trade_state %s", n.EventType, channels.Quote(tx.TradeState))
	}
	ev, err := paymentEvent(&tx, n.CreateTime)
	if err != nil {
		return channels.Result{}, err
	}
	return channels.Result{Event: ev}, nil
}

// paymentEvent is the payment event of a paid transaction, before the
// completion every event gets (tenant, channel, currency, fingerprint):
// built alike for a TRANSACTION.SUCCESS callback and a query answer, so
// both have the same key and fingerprint. createTime is the
// notification's, the fallback for a missing success_time ("" for a query
// answer, which has none).
func paymentEvent(tx *wechatTransaction, createTime string) (channels.Event, error) {
	ev := channels.Event{
		Type:            eventkey.PaymentReceived,
		TradeNo:         tx.TransactionID,
		MerchantOrderNo: tx.OutTradeNo,
		RawStatus:       tx.TradeState,
	}
	if err := channels.CheckID("wechat out_trade_no", tx.OutTradeNo); err != nil {
		return channels.Event{}, err
	}
	key, err := channels.PaymentKey(Code, tx.TransactionID)
	if err != nil {
		return channels.Event{}, err
	}
	ev.Key = key
	if ev.OrderTotal, err = tx.Amount.Total.positive("wechat amount.total"); err != nil {
		return channels.Event{}, err
	}
	if ev.OccurredAt, err = wechatTime(tx.SuccessTime, createTime); err != nil {
		return channels.Event{}, err
	}
	return ev, nil
}

func decodeWeChatRefund(plain []byte, n *wechatNotification) (res channels.Result, err error) {
	var rf wechatRefund
	defer func() { res.MerchantID = wechatMerchant(rf.MchID, rf.SubMchID) }()
	if !fastWeChatRefund(plain, &rf) {
		rf = wechatRefund{}
		if err := channels.Unmarshal(plain, &rf, "wechat refund"); err != nil {
			return channels.Result{}, foreignCurrencyFirst(plain, err)
		}
	}
	// The currency comes first, as for transactions, for every refund
	// status.
	if err := checkWeChatCurrency(rf.Amount.Currency); err != nil {
		return channels.Result{}, err
	}
	status := rf.RefundStatus
	if status == "" {
		status = rf.Status
	}
	ev := channels.Event{
		TradeNo:         rf.TransactionID,
		MerchantOrderNo: rf.OutTradeNo,
		RefundNo:        rf.OutRefundNo,
		RawStatus:       status,
	}
	// Every refund notification must name its refund: even the ignored
	// ones update a refund pre-registration.
	if _, err := channels.RefundKey(Code, rf.TransactionID, rf.OutRefundNo); err != nil {
		return channels.Result{}, err
	}
	if status == "" {
		return channels.Result{}, channels.Errorf(channels.KindMalformed, "wechat refund has no refund_status")
	}
	if "REFUND."+status != n.EventType {
		return channels.Result{}, channels.Errorf(channels.KindUnsupported, "wechat %s with refund_status %s", n.EventType, channels.Quote(status))
	}
	switch channels.RefundStatus(status) {
	case channels.RefundAbnormal:
		res := channels.Ignored("wechat REFUND.ABNORMAL: refund not final, no money moves", ev)
		res.RefundStatus = channels.RefundAbnormal
		return res, nil
	case channels.RefundClosed:
		res := channels.Ignored("wechat REFUND.CLOSED: refund closed, no money moves", ev)
		res.RefundStatus = channels.RefundClosed
		return res, nil
	}
	// SUCCESS: money moves.
	if ev, err = refundEvent(&rf, status, n.CreateTime); err != nil {
		return channels.Result{}, err
	}
	return channels.Result{Event: ev, RefundStatus: channels.RefundSuccess}, nil
}

// refundEvent is the event of a succeeded refund (status SUCCESS), before
// the completion every event gets: built alike for a REFUND.SUCCESS
// callback and a refund query answer, so both have the same key and
// fingerprint. createTime is as for paymentEvent.
func refundEvent(rf *wechatRefund, status, createTime string) (channels.Event, error) {
	key, err := channels.RefundKey(Code, rf.TransactionID, rf.OutRefundNo)
	if err != nil {
		return channels.Event{}, err
	}
	ev := channels.Event{
		Type:            eventkey.RefundSucceeded,
		Key:             key,
		TradeNo:         rf.TransactionID,
		MerchantOrderNo: rf.OutTradeNo,
		RefundNo:        rf.OutRefundNo,
		RawStatus:       status,
	}
	if err := channels.CheckID("wechat out_trade_no", rf.OutTradeNo); err != nil {
		return channels.Event{}, err
	}
	if ev.OrderTotal, err = rf.Amount.Total.positive("wechat amount.total"); err != nil {
		return channels.Event{}, err
	}
	if ev.RefundAmount, err = rf.Amount.Refund.positive("wechat amount.refund"); err != nil {
		return channels.Event{}, err
	}
	if ev.OccurredAt, err = wechatTime(rf.SuccessTime, createTime); err != nil {
		return channels.Event{}, err
	}
	return ev, nil
}

// wechatMerchant is the merchant a decrypted resource names: the
// sub-merchant in partner mode (sp_mchid is the service provider, which
// serves many tenants), else mchid.
func wechatMerchant(mchID, subMchID string) string {
	if subMchID != "" {
		return subMchID
	}
	return mchID
}

// checkWeChatCurrency refuses, with KindUnsupported, an amount.currency
// other than CNY; an absent currency means CNY.
func checkWeChatCurrency(c string) error {
	if c != "" && c != channels.CurrencyCNY {
		return channels.Errorf(channels.KindUnsupported, "wechat currency %s", channels.Quote(c))
	}
	return nil
}

// wechatCurrencyOnly reads nothing of a decrypted resource but its
// amount.currency.
type wechatCurrencyOnly struct {
	Amount struct {
		Currency string `json:"currency"`
	} `json:"amount"`
}

// foreignCurrencyFirst returns the KindUnsupported refusal of a resource
// that failed to decode (decodeErr) when the resource still names a
// currency other than CNY, so that the currency is judged before anything
// else whatever the rest of the resource holds; otherwise decodeErr.
func foreignCurrencyFirst(plain []byte, decodeErr error) error {
	var c wechatCurrencyOnly
	if channels.DecodeJSON(plain, &c) != nil {
		return decodeErr
	}
	if err := checkWeChatCurrency(c.Amount.Currency); err != nil {
		return err
	}
	return decodeErr
}

// wechatTime parses success_time, else the notification's create_time
// (RFC 3339, +08:00), into UTC.
func wechatTime(success, created string) (time.Time, error) {
	s := success
	if s == "" {
		s = created
	}
	if s == "" {
		return time.Time{}, channels.Errorf(channels.KindMalformed, "wechat notification has neither success_time nor create_time")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, channels.Errorf(channels.KindMalformed, "wechat time %s: %w", channels.Quote(s), err)
	}
	return t.UTC(), nil
}

// jsonFen is an integer fen amount in a JSON number. It accepts only a plain
// non-negative integer literal (no sign, fraction, exponent or string) up to
// MaxAmount; anything else fails decoding with KindInvalidAmount.
type jsonFen struct {
	v   int64
	set bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *jsonFen) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = jsonFen{}
		return nil
	}
	v, err := channels.ParseUint(string(b), channels.MaxAmount)
	if err != nil {
		return &channels.Error{Kind: channels.KindInvalidAmount, Err: channels.AmountError(string(b), err)}
	}
	*f = jsonFen{v: v, set: true}
	return nil
}

// positive returns the amount, failing with KindInvalidAmount when it is
// missing or zero.
func (f jsonFen) positive(name string) (int64, error) {
	if !f.set {
		return 0, channels.Errorf(channels.KindInvalidAmount, "%s is missing", name)
	}
	if f.v <= 0 {
		return 0, channels.Errorf(channels.KindInvalidAmount, "%s is %d, must be positive", name, f.v)
	}
	return f.v, nil
}

// viewWeChatResource is WeChat's Spec.ViewResource: the notification's
// resource as dlq show prints it, decrypted as the decoder decrypts it
// (decryptWeChat) when keys is not nil; nil for a body that is not JSON or
// repeats a member name (it has no one reading to show).
func viewWeChatResource(env channels.Envelope, keys channels.KeyProvider) *channels.ResourceView {
	var n struct {
		EventType string         `json:"event_type"`
		Resource  wechatResource `json:"resource"`
	}
	if channels.DecodeJSON([]byte(env.Body), &n) != nil {
		return nil
	}
	r := n.Resource
	v := &channels.ResourceView{
		EventType: n.EventType, Algorithm: r.Algorithm, AssociatedData: r.AssociatedData, Nonce: r.Nonce,
		OriginalType: r.OriginalType, CiphertextLength: len(r.Ciphertext),
	}
	if keys == nil {
		return v
	}
	plain, _, err := decryptWeChat(keys, env.TenantID, &r)
	if err != nil {
		v.DecryptError = err.Error()
		return v
	}
	if json.Valid(plain) {
		v.Decrypted = plain
	} else {
		quoted, _ := json.Marshal(string(plain))
		v.Decrypted = quoted
	}
	return v
}
