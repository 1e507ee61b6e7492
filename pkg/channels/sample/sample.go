package sample

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/channels/alipay"
	"github.com/paycallback/paycallback/pkg/channels/sqb"
	"github.com/paycallback/paycallback/pkg/channels/wechat"
)

// APIv3Key is the fake WeChat APIv3 key of the test vectors in
// docs/channels.md.
const APIv3Key = "0123456789abcdef0123456789abcdef"

// Keys returns a key provider that gives APIv3Key to every tenant.
func Keys() channels.StaticKeys { return channels.StaticKeys{Default: APIv3Key} }

// Beijing is UTC+8, the zone the channels write their times in.
var Beijing = time.FixedZone("CST", 8*3600)

// BaseTime is the default payment time: 2024-06-01 12:00:05 Beijing time.
var BaseTime = time.Date(2024, 6, 1, 12, 0, 5, 0, Beijing)

// Trade is one order paid through a channel.
type Trade struct {
	TenantID        int64            // default 1001
	Channel         channels.Channel // WECHAT, ALIPAY or SQB
	TradeNo         string           // the channel's trade number (transaction_id, trade_no, sn)
	MerchantOrderNo string           // out_trade_no / client_sn
	Total           int64            // order total in fen
	PaidAt          time.Time        // default BaseTime
}

// NewTrade returns a trade with realistic, unique numbers for seq on the
// channel: tenant 1001, total 2580 fen, paid at BaseTime plus seq seconds.
func NewTrade(ch channels.Channel, seq int) Trade {
	t := Trade{
		TenantID:        1001,
		Channel:         ch,
		MerchantOrderNo: fmt.Sprintf("POS20240601%06d", seq),
		Total:           2580,
		PaidAt:          BaseTime.Add(time.Duration(seq) * time.Second),
	}
	if b, ok := BodiesOf(ch); ok {
		t.TradeNo = b.TradeNo(seq)
	} else {
		t.TradeNo = fmt.Sprintf("789325%010d", seq)
	}
	return t
}

// Refund is one refund of a trade.
type Refund struct {
	// No is the refund number: WeChat out_refund_no, Alipay out_biz_no,
	// Shouqianba refund_request_no.
	No string
	// Amount is this refund's own amount in fen (WeChat).
	Amount int64
	// Cumulative is the amount refunded so far, this refund included
	// (Alipay refund_fee, Shouqianba total_amount - net_amount). When zero,
	// Amount is used.
	Cumulative int64
	// At is when the refund succeeded; default the trade's PaidAt + 1h.
	At time.Time
}

// SQBForm chooses how a Shouqianba refund carries its refund number.
type SQBForm int

// The Shouqianba refund shapes.
const (
	// SQBRequestNo: refund_request_no and client_tsn (client_sn-no).
	SQBRequestNo SQBForm = iota
	// SQBClientTSN: only client_tsn; the number is its suffix.
	SQBClientTSN
	// SQBNoRefundNo: neither; the decoder falls back to the cumulative amount.
	SQBNoRefundNo
	// SQBAPIResponse: the refund API response forwarded by the receiver
	// ({"result_code":"200","biz_response":{"data":{...}}}), with client_tsn.
	SQBAPIResponse
)

// Delivery describes one delivery of a notification. The zero value is the
// first delivery with defaults.
type Delivery struct {
	// Attempt numbers redeliveries (0 = first). It changes the delivery
	// fields that are left empty below.
	Attempt int
	// ReceivedAt is the envelope's received_at; default the notify time
	// plus 120ms.
	ReceivedAt time.Time
	// NotifyTime is Alipay's notify_time (and the basis of the WeChat
	// create_time); default the event time + 1s + 4min per attempt.
	NotifyTime time.Time
	// NotifyID is Alipay's notify_id; default stable per notification.
	NotifyID string
	// ID is the WeChat envelope id; default derived from the notification
	// and attempt.
	ID string
	// Nonce is the WeChat resource nonce, 12 bytes; default derived from
	// the notification and attempt.
	Nonce string
	// APIv3Key encrypts WeChat resources; default APIv3Key.
	APIv3Key string
	// Partner uses WeChat partner-mode field names (sp_mchid, sub_mchid).
	Partner bool
	// SQB chooses the Shouqianba refund shape.
	SQB SQBForm
	// Edit, when set, changes the payload before it is encoded: the WeChat
	// decrypted resource, the Alipay form fields (values are formatted with
	// fmt.Sprint; delete a key to drop a field) or the Shouqianba order
	// fields.
	Edit func(payload map[string]any)
}

// PaymentEnvelope is the payment notification of t on its channel.
func PaymentEnvelope(t Trade, d Delivery) []byte {
	return mustBodies(t.Channel).Payment(t, d)
}

// StatementPayment is the statement event `consumer statement reconcile
// --publish-missing` would publish for t's payment (rebuilt from what a
// statement line says, so its key and fingerprint are the callback's) and
// the message value it publishes, unsigned. It panics if t's payment does
// not decode: a test's own mistake.
func StatementPayment(t Trade) (channels.Event, []byte) {
	res, err := channels.NewDecoder(Keys()).Decode(PaymentEnvelope(t, Delivery{}))
	if err != nil {
		panic(err)
	}
	cb := res.Event
	ev, err := channels.NewStatementEvent(channels.Event{
		TenantID: cb.TenantID, Channel: cb.Channel, Type: cb.Type, TradeNo: cb.TradeNo, MerchantOrderNo: cb.MerchantOrderNo,
		OrderTotal: cb.OrderTotal, OccurredAt: cb.OccurredAt, ReceivedAt: time.Now(), RawStatus: "SUCCESS",
	})
	if err != nil {
		panic(err)
	}
	value, err := channels.StatementEnvelope(ev, time.Now())
	if err != nil {
		panic(err)
	}
	return ev, value
}

// RefundEnvelope is the successful refund notification of r on t's channel
// (for Alipay a partial refund, or a full one when the cumulative reaches the
// total; for Shouqianba PARTIAL_REFUNDED or REFUNDED likewise).
func RefundEnvelope(t Trade, r Refund, d Delivery) []byte {
	return mustBodies(t.Channel).Refund(t, r, d)
}

// Envelope wraps a body in the contract's envelope JSON with the content
// type the contract gives the channel.
func Envelope(tenantID int64, ch channels.Channel, body string, receivedAt time.Time) []byte {
	return EnvelopeWith(channels.Envelope{
		TenantID:    tenantID,
		Channel:     string(ch),
		ReceivedAt:  receivedAt,
		ContentType: ch.ContentType(),
		Body:        body,
	})
}

// EnvelopeWith encodes env as is (for envelopes that break the contract).
// ReceivedAt is written in Beijing time with milliseconds, as the receiver
// does.
func EnvelopeWith(env channels.Envelope) []byte {
	type wire struct {
		TenantID    int64  `json:"tenant_id"`
		Channel     string `json:"channel"`
		ReceivedAt  string `json:"received_at"`
		ContentType string `json:"content_type"`
		Body        string `json:"body"`
	}
	w := wire{env.TenantID, env.Channel, "", env.ContentType, env.Body}
	if !env.ReceivedAt.IsZero() {
		w.ReceivedAt = env.ReceivedAt.In(Beijing).Format("2006-01-02T15:04:05.000Z07:00")
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic(err)
	}
	return b
}

// ---- WeChat Pay v3 ----

// WeChatPayment is a TRANSACTION.SUCCESS notification for t.
func WeChatPayment(t Trade, d Delivery) []byte {
	t = t.defaults()
	payload := map[string]any{
		"out_trade_no":     t.MerchantOrderNo,
		"transaction_id":   t.TradeNo,
		"trade_type":       "JSAPI",
		"trade_state":      "SUCCESS",
		"trade_state_desc": "支付成功",
		"bank_type":        "OTHERS",
		"attach":           "",
		"success_time":     wechatTime(t.PaidAt),
		"amount": map[string]any{
			"total": t.Total, "payer_total": t.Total, "currency": "CNY", "payer_currency": "CNY",
		},
	}
	if d.Partner {
		payload["sp_mchid"], payload["sub_mchid"] = "1900000100", "1900000109"
		payload["sp_appid"], payload["sub_appid"] = "wx8888888888888888", "wxd678efh567hg6999"
		payload["payer"] = map[string]any{"sp_openid": "oUpF8uN95-Ptaags6E_roPHg7AG0"}
	} else {
		payload["mchid"], payload["appid"] = "1230000109", "wxd678efh567hg6787"
		payload["payer"] = map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}
	}
	return wechatEnvelope(t, wechat.TransactionSuccess, "transaction", "支付成功", t.PaidAt, payload, t.TradeNo, d)
}

// WeChatRefund is a REFUND.<status> notification (status SUCCESS, ABNORMAL
// or CLOSED) for refund r of t; success_time is only written on SUCCESS.
func WeChatRefund(t Trade, r Refund, status string, d Delivery) []byte {
	t = t.defaults()
	r = r.defaults(t)
	payload := map[string]any{
		"out_trade_no":          t.MerchantOrderNo,
		"transaction_id":        t.TradeNo,
		"refund_id":             "503009099320240601" + digits(t.TradeNo+r.No, 11),
		"out_refund_no":         r.No,
		"refund_status":         status,
		"user_received_account": "支付用户零钱",
		"amount": map[string]any{
			"total": t.Total, "refund": r.Amount, "payer_total": t.Total, "payer_refund": r.Amount,
		},
	}
	if status == "SUCCESS" {
		payload["success_time"] = wechatTime(r.At)
	}
	if d.Partner {
		payload["sp_mchid"], payload["sub_mchid"] = "1900000100", "1900000109"
	} else {
		payload["mchid"] = "1230000109"
	}
	return wechatEnvelope(t, "REFUND."+status, "refund", "退款"+status, r.At, payload, t.TradeNo+"/"+r.No+"/"+status, d)
}

// WeChatBody builds a v3 notification body (plaintext outer JSON) around an
// encrypted resource. Fields left empty in d get the defaults derived from
// seed and d.Attempt.
func WeChatBody(eventType, originalType, summary string, createTime time.Time, plaintext []byte, seed string, d Delivery) string {
	key := d.APIv3Key
	if key == "" {
		key = APIv3Key
	}
	nonce := d.Nonce
	if nonce == "" {
		nonce = digest(seed, d.Attempt, "nonce")[:12]
	}
	id := d.ID
	if id == "" {
		h := digest(seed, d.Attempt, "id")
		id = h[:8] + "-" + h[8:12] + "-5" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
	}
	body := map[string]any{
		"id":            id,
		"create_time":   wechatTime(createTime.Add(attemptDelay(d.Attempt, 15*time.Second))),
		"resource_type": wechat.ResourceType,
		"event_type":    eventType,
		"summary":       summary,
		"resource": map[string]any{
			"original_type":   originalType,
			"algorithm":       wechat.Algorithm,
			"ciphertext":      EncryptWeChat(key, nonce, originalType, plaintext),
			"associated_data": originalType,
			"nonce":           nonce,
		},
	}
	return string(mustJSON(body))
}

// EncryptWeChat seals plaintext the way WeChat Pay does: AES-256-GCM with
// the 32-byte APIv3 key as raw bytes, the 12-byte nonce and associated data
// as raw bytes, and returns base64(ciphertext || tag).
func EncryptWeChat(key, nonce, associatedData string, plaintext []byte) string {
	block, err := aes.NewCipher([]byte(key))
	if err != nil {
		panic("sample: apiv3 key: " + err.Error())
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	if len(nonce) != gcm.NonceSize() {
		panic("sample: wechat nonce must be 12 bytes")
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(associatedData)))
}

func wechatEnvelope(t Trade, eventType, originalType, summary string, at time.Time, payload map[string]any, seed string, d Delivery) []byte {
	if d.Edit != nil {
		d.Edit(payload)
	}
	notify := d.notifyTime(at)
	body := WeChatBody(eventType, originalType, summary, at.Add(time.Second), mustJSON(payload), seed, d)
	return Envelope(t.TenantID, channels.WeChat, body, d.receivedAt(notify))
}

func wechatTime(t time.Time) string { return t.In(Beijing).Format(time.RFC3339) }

// ---- Alipay ----

// AlipayPayment is a TRADE_SUCCESS payment notification for t (it carries
// no refund markers).
func AlipayPayment(t Trade, d Delivery) []byte {
	return alipayTrade(t, alipay.TradeSuccess, d)
}

// AlipayFinished is the TRADE_FINISHED notification for t: same amounts as
// the payment, sent when the trade can no longer be refunded.
func AlipayFinished(t Trade, d Delivery) []byte {
	return alipayTrade(t, alipay.TradeFinished, d)
}

// AlipayWaitBuyerPay is a WAIT_BUYER_PAY notification (no money moves).
func AlipayWaitBuyerPay(t Trade, d Delivery) []byte {
	t = t.defaults()
	f := alipayBase(t, alipay.WaitBuyerPay)
	return alipayEnvelope(t, f, "wait"+t.TradeNo, t.PaidAt.Add(-time.Minute), d)
}

// AlipayUnpaidClose is a TRADE_CLOSED notification of an order that was
// never paid (no refund markers; no money moves).
func AlipayUnpaidClose(t Trade, d Delivery) []byte {
	t = t.defaults()
	f := alipayBase(t, alipay.TradeClosed)
	delete(f, "gmt_payment")
	f["gmt_close"] = alipayTime(t.PaidAt.Add(15 * time.Minute))
	return alipayEnvelope(t, f, "close"+t.TradeNo, t.PaidAt.Add(15*time.Minute), d)
}

// AlipayRefund is the notification of refund r of t: TRADE_SUCCESS with
// refund_fee (the cumulative), gmt_refund and out_biz_no for a partial
// refund; TRADE_CLOSED with gmt_close as well once the cumulative reaches the
// total.
func AlipayRefund(t Trade, r Refund, d Delivery) []byte {
	t = t.defaults()
	r = r.defaults(t)
	status := alipay.TradeSuccess
	if r.Cumulative >= t.Total {
		status = alipay.TradeClosed
	}
	f := alipayBase(t, status)
	f["out_biz_no"] = r.No
	f["refund_fee"] = Yuan(r.Cumulative)
	f["gmt_refund"] = r.At.In(Beijing).Format("2006-01-02 15:04:05.000")
	if status == alipay.TradeClosed {
		f["gmt_close"] = alipayTime(r.At)
	}
	return alipayEnvelope(t, f, "refund"+t.TradeNo+"/"+r.No, r.At, d)
}

// AlipayForm encodes fields as an Alipay form body (sorted, URL-encoded).
func AlipayForm(fields map[string]any) string {
	v := url.Values{}
	for k, x := range fields {
		v.Set(k, fmt.Sprint(x))
	}
	return v.Encode()
}

// Yuan formats fen as Alipay writes amounts: "25.80", "0.01", "20.00".
func Yuan(fen int64) string {
	return fmt.Sprintf("%d.%02d", fen/100, fen%100)
}

func alipayTrade(t Trade, status string, d Delivery) []byte {
	t = t.defaults()
	at := t.PaidAt
	if status == alipay.TradeFinished {
		at = at.AddDate(0, 3, 0)
	}
	return alipayEnvelope(t, alipayBase(t, status), status+t.TradeNo, at, d)
}

func alipayBase(t Trade, status string) map[string]any {
	return map[string]any{
		"notify_type":      alipay.NotifyType,
		"app_id":           "2021000000000000",
		"auth_app_id":      "2021000000000000",
		"charset":          "utf-8",
		"version":          "1.0",
		"sign_type":        "RSA2",
		"sign":             "c2lnbmF0dXJlLXZlcmlmaWVkLXVwc3RyZWFt" + digits(t.TradeNo, 8),
		"trade_no":         t.TradeNo,
		"out_trade_no":     t.MerchantOrderNo,
		"buyer_id":         "2088102" + digits(t.MerchantOrderNo, 9),
		"seller_id":        "2088101117955611",
		"trade_status":     status,
		"total_amount":     Yuan(t.Total),
		"receipt_amount":   Yuan(t.Total),
		"buyer_pay_amount": Yuan(t.Total),
		"invoice_amount":   Yuan(t.Total),
		"point_amount":     "0.00",
		"subject":          "门店消费",
		"gmt_create":       alipayTime(t.PaidAt.Add(-10 * time.Second)),
		"gmt_payment":      alipayTime(t.PaidAt),
		"fund_bill_list":   `[{"amount":"` + Yuan(t.Total) + `","fundChannel":"ALIPAYACCOUNT"}]`,
	}
}

func alipayEnvelope(t Trade, f map[string]any, seed string, at time.Time, d Delivery) []byte {
	notify := d.notifyTime(at)
	f["notify_time"] = alipayTime(notify)
	f["notify_id"] = d.NotifyID
	if d.NotifyID == "" {
		f["notify_id"] = "2024060101222" + digits(seed, 21)
	}
	if d.Edit != nil {
		d.Edit(f)
	}
	return Envelope(t.TenantID, channels.Alipay, AlipayForm(f), d.receivedAt(notify))
}

func alipayTime(t time.Time) string { return t.In(Beijing).Format(alipay.TimeLayout) }

// ---- Shouqianba ----

// SQBPayment is a PAID/SUCCESS callback for t.
func SQBPayment(t Trade, d Delivery) []byte {
	t = t.defaults()
	o := sqbBase(t, sqb.Paid, sqb.StatusSuccess, t.Total)
	o["client_tsn"] = t.MerchantOrderNo
	return sqbEnvelope(t, o, t.PaidAt, d)
}

// SQBRefund is the callback of refund r of t: PARTIAL_REFUNDED, or REFUNDED
// once the cumulative reaches the total, with net_amount = total -
// cumulative; d.SQB chooses how the refund number is carried.
func SQBRefund(t Trade, r Refund, d Delivery) []byte {
	t = t.defaults()
	r = r.defaults(t)
	status := sqb.PartialRefunded
	if r.Cumulative >= t.Total {
		status = sqb.Refunded
	}
	o := sqbBase(t, status, sqb.StatusSuccess, t.Total-r.Cumulative)
	o["finish_time"] = millis(r.At)
	o["channel_finish_time"] = millis(r.At.Truncate(time.Second))
	switch d.SQB {
	case SQBRequestNo:
		o["refund_request_no"] = r.No
		o["client_tsn"] = t.MerchantOrderNo + "-" + r.No
	case SQBClientTSN, SQBAPIResponse:
		o["client_tsn"] = t.MerchantOrderNo + "-" + r.No
	case SQBNoRefundNo:
		o["client_tsn"] = t.MerchantOrderNo
	}
	return sqbEnvelope(t, o, r.At, d)
}

// SQBCancel is the CANCELED callback of t, 30 minutes after its payment
// time: decoded as a refund numbered CANCEL, which nets the trade to zero
// whether or not it was paid.
func SQBCancel(t Trade, d Delivery) []byte {
	t = t.defaults()
	at := t.PaidAt.Add(30 * time.Minute)
	o := sqbBase(t, sqb.Canceled, sqb.StatusSuccess, 0)
	o["finish_time"] = millis(at)
	o["channel_finish_time"] = millis(at.Truncate(time.Second))
	return sqbEnvelope(t, o, at, d)
}

// SQBState is a callback for t with any order_status and status, e.g.
// CREATED, PAY_CANCELED or a FAIL_* status (no money moves).
func SQBState(t Trade, orderStatus, status string, d Delivery) []byte {
	t = t.defaults()
	return sqbEnvelope(t, sqbBase(t, orderStatus, status, t.Total), t.PaidAt, d)
}

func sqbBase(t Trade, orderStatus, status string, net int64) map[string]any {
	return map[string]any{
		"terminal_sn":         "01939202039923029",
		"sn":                  t.TradeNo,
		"client_sn":           t.MerchantOrderNo,
		"client_tsn":          t.MerchantOrderNo,
		"trade_no":            "4003262001" + digits(t.TradeNo, 18),
		"status":              status,
		"order_status":        orderStatus,
		"payway":              "3",
		"sub_payway":          "1",
		"total_amount":        strconv.FormatInt(t.Total, 10),
		"net_amount":          strconv.FormatInt(net, 10),
		"subject":             "门店消费",
		"finish_time":         millis(t.PaidAt),
		"channel_finish_time": millis(t.PaidAt.Truncate(time.Second)),
		"operator":            "cashier01",
		"reflect":             "",
		"payment_list": []map[string]string{
			{"type": "WALLET_WEIXIN", "amount_total": strconv.FormatInt(t.Total, 10)},
		},
	}
}

func sqbEnvelope(t Trade, o map[string]any, at time.Time, d Delivery) []byte {
	if d.Edit != nil {
		d.Edit(o)
	}
	var body []byte
	if d.SQB == SQBAPIResponse {
		body = mustJSON(map[string]any{
			"result_code": "200",
			"biz_response": map[string]any{
				"result_code": "REFUND_SUCCESS",
				"data":        o,
			},
		})
	} else {
		body = mustJSON(o)
	}
	return Envelope(t.TenantID, channels.SQB, string(body), d.receivedAt(d.notifyTime(at)))
}

func millis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// ---- helpers ----

func (t Trade) defaults() Trade {
	if t.TenantID == 0 {
		t.TenantID = 1001
	}
	if t.PaidAt.IsZero() {
		t.PaidAt = BaseTime
	}
	return t
}

func (r Refund) defaults(t Trade) Refund {
	if r.Cumulative == 0 {
		r.Cumulative = r.Amount
	}
	if r.Amount == 0 {
		r.Amount = r.Cumulative
	}
	if r.At.IsZero() {
		r.At = t.PaidAt.Add(time.Hour)
	}
	return r
}

func (d Delivery) notifyTime(event time.Time) time.Time {
	if !d.NotifyTime.IsZero() {
		return d.NotifyTime
	}
	return event.Add(time.Second + attemptDelay(d.Attempt, 4*time.Minute))
}

func (d Delivery) receivedAt(notify time.Time) time.Time {
	if !d.ReceivedAt.IsZero() {
		return d.ReceivedAt
	}
	return notify.Add(120 * time.Millisecond)
}

func attemptDelay(attempt int, step time.Duration) time.Duration {
	return time.Duration(attempt) * step
}

// digest is a deterministic hex string derived from seed and attempt.
func digest(seed string, attempt int, purpose string) string {
	sum := sha256.Sum256([]byte(purpose + "\x00" + seed + "\x00" + strconv.Itoa(attempt)))
	return hex.EncodeToString(sum[:])
}

// digits is a deterministic string of n decimal digits derived from seed.
func digits(seed string, n int) string {
	sum := sha256.Sum256([]byte(seed))
	out := make([]byte, n)
	for i := range out {
		out[i] = '0' + sum[i%len(sum)]%10
	}
	return string(out)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
