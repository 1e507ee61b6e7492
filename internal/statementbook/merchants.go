package statementbook

import (
	"errors"
	"fmt"
	"strings"

	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// ErrMerchantNotBound is wrapped by CheckStatementMerchants' error: the
// statement names a merchant the binding does not give to the tenant it is
// imported for, or names none.
var ErrMerchantNotBound = errors.New("the statement names a merchant not bound to the tenant")

// CheckStatementMerchants checks that every merchant st names
// (statements.Statement.BindingMerchantIDs) is bound to tenant by b, the merchant
// binding (PAYCB_TENANT_MERCHANTS_FILE): a statement imported under
// another merchant's tenant would make reconcile --publish-missing post
// that merchant's trades into this tenant. A service provider's WeChat bill
// downloaded without sub_mchid names every sub-merchant, and each must be
// the tenant's. The error wraps ErrMerchantNotBound and names every
// merchant refused, with the tenant the binding gives it, if any; source
// names the binding in it.
func CheckStatementMerchants(b merchantbinding.Binding, source string, tenant int64, st statements.Statement) error {
	ids := st.BindingMerchantIDs()
	if len(ids) == 0 {
		return fmt.Errorf("%w: the %s statement names no merchant (%s), so it cannot be bound to tenant %d",
			ErrMerchantNotBound, st.Channel, statementMerchantField(st.Channel), tenant)
	}
	var refused []string
	for _, id := range ids {
		switch owner, ok := b.TenantOf(st.Channel, id); {
		case id == "":
			refused = append(refused, fmt.Sprintf("a line that names no merchant (%s)", statementMerchantField(st.Channel)))
		case statements.UnboundMerchant(st.Channel, id) != "":
			refused = append(refused, statements.UnboundMerchant(st.Channel, id))
		case !ok:
			refused = append(refused, fmt.Sprintf("merchant %s (bound to no tenant)", id))
		case owner != tenant:
			refused = append(refused, fmt.Sprintf("merchant %s (bound to tenant %d)", id, owner))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the %s statement names %s, not bound to tenant %d in %s",
		ErrMerchantNotBound, st.Channel, strings.Join(refused, ", "), tenant, source)
}

// statementMerchantField says where a channel's statement names its
// merchant (channels.Spec.StatementMerchantField).
func statementMerchantField(ch channels.Channel) string {
	spec, _ := channels.Lookup(ch) // a parsed statement's channel is registered
	return spec.StatementMerchantField
}
