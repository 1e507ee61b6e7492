package alipay

import (
	"fmt"
	"strings"
)

// AccountSuffix ends the account an Alipay bill names in its
// #账号：[…] head: the merchant's PID (the callbacks' seller_id) followed
// by 0156.
const AccountSuffix = "0156"

// alipayPID is the PID of an Alipay account: the account less 0156, or
// the account in brackets when it is not a PID followed by 0156 ("" stays
// "": no account).
func alipayPID(account string) string {
	if account == "" {
		return ""
	}
	if pid, ok := strings.CutSuffix(account, AccountSuffix); ok && pid != "" {
		return pid
	}
	return "[" + account + "]"
}

// alipayUnbound says why an Alipay account as alipayPID names it cannot be
// bound: it is in brackets when it is not a PID followed by
// AccountSuffix.
func alipayUnbound(id string) string {
	if !strings.HasPrefix(id, "[") {
		return ""
	}
	return fmt.Sprintf("account %s, which is not a PID followed by %s", strings.Trim(id, "[]"), AccountSuffix)
}
