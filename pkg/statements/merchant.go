package statements

import (
	"fmt"
	"strings"
)

// AlipayAccountSuffix ends the account an Alipay bill names in its
// #账号：[…] head: the merchant's PID (the callbacks' seller_id) followed
// by 0156.
const AlipayAccountSuffix = "0156"

// BindingMerchantIDs returns the distinct merchants the statement names,
// in order of first appearance, in the merchant binding's terms
// (PAYCB_TENANT_MERCHANTS_FILE), as MerchantIDs names them in the file's:
// WeChat and Shouqianba merchants as they are (a line's 特约商户号 when not
// 0, else its 商户号; terminal_sn); for Alipay the account less its 0156
// suffix (the PID), or, when it lacks the suffix, the account in brackets,
// as the head writes it, which no binding can name. A line that names no
// merchant contributes "". It is empty only for a statement without lines
// and without an Alipay account: the caller must refuse to bind such a
// statement to a tenant.
func (s Statement) BindingMerchantIDs() []string {
	var out []string
	seen := map[string]bool{}
	bind := parsers[s.Channel].BindingMerchantID
	add := func(id string) {
		if bind != nil {
			id = bind(id)
		}
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	for _, l := range s.Lines {
		add(l.MerchantID)
	}
	if s.Account != "" {
		add(s.Account)
	}
	return out
}

// alipayPID is the PID of an Alipay account: the account less 0156, or
// the account in brackets when it is not a PID followed by 0156 ("" stays
// "": no account).
func alipayPID(account string) string {
	if account == "" {
		return ""
	}
	if pid, ok := strings.CutSuffix(account, AlipayAccountSuffix); ok && pid != "" {
		return pid
	}
	return "[" + account + "]"
}

// alipayUnbound says why an Alipay account as alipayPID names it cannot be
// bound: it is in brackets when it is not a PID followed by
// AlipayAccountSuffix.
func alipayUnbound(id string) string {
	if !strings.HasPrefix(id, "[") {
		return ""
	}
	return fmt.Sprintf("account %s, which is not a PID followed by %s", strings.Trim(id, "[]"), AlipayAccountSuffix)
}
