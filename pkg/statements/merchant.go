package statements

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/paycallback/paycallback/pkg/channels"
)

// AlipayAccountSuffix ends the account an Alipay bill names in its
// #账号：[…] header: the merchant's PID (the callbacks' seller_id)
// followed by 0156.
const AlipayAccountSuffix = "0156"

// MerchantIDs returns the distinct merchants the file names, in order of
// first appearance and in the merchant binding's terms
// (PAYCB_TENANT_MERCHANTS_FILE): for WeChat each line's 特约商户号 when it
// is not 0 (a service provider's sub-merchant), else its 商户号; for Alipay
// the account of the #账号 header with its 0156 suffix removed, or, when
// it lacks the suffix, the account as the header writes it, brackets
// included, which no binding can name; for Shouqianba each response's
// terminal_sn. A line that names no merchant contributes "". It is empty
// for a statement not read from a file (or an Alipay bill without the
// header): the caller must refuse to bind such a statement to a tenant.
func (s Statement) MerchantIDs() []string {
	if s.Channel != channels.Alipay {
		return slices.Clone(s.Merchants)
	}
	out := make([]string, 0, len(s.Merchants))
	for _, account := range s.Merchants {
		if pid, ok := strings.CutSuffix(account, AlipayAccountSuffix); ok && pid != "" {
			out = append(out, pid)
		} else {
			out = append(out, "["+account+"]")
		}
	}
	return out
}

// merchantSet collects distinct merchant IDs in order of first
// appearance.
type merchantSet struct {
	ids  []string
	seen map[string]bool
}

func (m *merchantSet) add(id string) {
	if m.seen[id] {
		return
	}
	if m.seen == nil {
		m.seen = map[string]bool{}
	}
	m.seen[id] = true
	m.ids = append(m.ids, id)
}

// appendDistinct appends id to ids unless it is there already.
func appendDistinct(ids []string, id string) []string {
	if slices.Contains(ids, id) {
		return ids
	}
	return append(ids, id)
}

// wechatMerchant is a bill row's merchant: the sub-merchant (特约商户号)
// when there is one, else the merchant (商户号). A normal merchant's bill
// writes 0 as its 特约商户号.
func wechatMerchant(mchID, subMchID string) string {
	if subMchID != "" && subMchID != "0" {
		return subMchID
	}
	return mchID
}

// alipayAccount reads the account of a #账号：[…] header line.
func alipayAccount(line string) string {
	rest := strings.TrimPrefix(line, alipayAccountHeader)
	if open, end := strings.IndexByte(rest, '['), strings.IndexByte(rest, ']'); open >= 0 && end > open {
		return rest[open+1 : end]
	}
	return strings.TrimSpace(rest)
}

// alipayAccountHeader starts the header line that names the bill's
// account.
const alipayAccountHeader = "#账号："

// sqbTerminal reads the terminal_sn of a query response line that
// parseSQBLine accepted.
func sqbTerminal(raw []byte) string {
	var resp struct {
		BizResponse struct {
			Data struct {
				TerminalSN string `json:"terminal_sn"`
			} `json:"data"`
		} `json:"biz_response"`
	}
	if json.Unmarshal(raw, &resp) != nil {
		return ""
	}
	return resp.BizResponse.Data.TerminalSN
}
