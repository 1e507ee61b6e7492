package statements

// BindingMerchantIDs returns the distinct merchants the statement names,
// in order of first appearance, in the merchant binding's terms
// (PAYCB_TENANT_MERCHANTS_FILE), as MerchantIDs names them in the file's,
// each turned by the channel's Parser.BindingMerchantID (WeChat and
// Shouqianba merchants as they are; for Alipay the account less its 0156
// suffix, or, without it, the account in brackets, which no binding can
// name: Parser.UnboundMerchant says so). A line that names no
// merchant contributes "". It is empty only for a statement without lines
// and without an Alipay account: the caller must refuse to bind such a
// statement to a tenant.
func (s Statement) BindingMerchantIDs() []string {
	var out []string
	seen := map[string]bool{}
	p, _ := ParserOf(s.Channel)
	bind := p.BindingMerchantID
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
