package ops

import (
	"context"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/pkg/settlement"
)

// The reconciliation checks live in pkg/settlement (settlement.Reconcile), the
// one implementation of the ledger's rules that the settlement tests, the
// demo, the bench, the simulation, the soak and consumer reconcile all run.
// These names are the operator commands' view of them.

// The check names; see settlement.Checks.
const (
	CheckLedgerRow                 = settlement.CheckLedgerRow
	CheckPostingUnbalanced         = settlement.CheckPostingUnbalanced
	CheckPostingWithoutClaim       = settlement.CheckPostingWithoutClaim
	CheckOrderLedger               = settlement.CheckOrderLedger
	CheckOrderState                = settlement.CheckOrderState
	CheckLedgerWithoutOrder        = settlement.CheckLedgerWithoutOrder
	CheckPendingPayment            = settlement.CheckPendingPayment
	CheckRefundUnregistered        = settlement.CheckRefundUnregistered
	CheckRefundMismatch            = settlement.CheckRefundMismatch
	CheckRefundOpen                = settlement.CheckRefundOpen
	CheckOverRefundNotDeadLettered = settlement.CheckOverRefundNotDeadLettered
)

// Checks lists the reconciliation checks in the order they run.
var Checks = settlement.Checks

// CheckSummaries says in one line what each check of Checks reports.
var CheckSummaries = settlement.CheckSummaries

// ErrUnknownCheck is wrapped by Reconcile and SelectChecks for a check name
// not in Checks: a usage error.
var ErrUnknownCheck = settlement.ErrUnknownCheck

// SelectChecks returns the checks o runs and why each other is skipped, or
// an error wrapping ErrUnknownCheck (settlement.SelectChecks).
func SelectChecks(o ReconcileOptions) (run []string, skipped map[string]string, err error) {
	run, skipped, err = settlement.SelectChecks(o)
	if err != nil {
		return nil, nil, err //nolint:wrapcheck // names the check already
	}
	return run, skipped, nil
}

// ReconcileOptions bound, tune and select a reconciliation
// (settlement.ReconcileOptions).
type ReconcileOptions = settlement.ReconcileOptions

// ReconcileReport is what Reconcile found (settlement.ReconcileReport).
type ReconcileReport = settlement.ReconcileReport

// Discrepancy is one finding (settlement.Discrepancy).
type Discrepancy = settlement.Discrepancy

// Reconcile runs the selected checks against db, read-only: see
// settlement.Reconcile for what is checked and the error contract (database
// errors, and settlement.ErrUnknownCheck for an unknown check name).
func Reconcile(ctx context.Context, db bun.IDB, o ReconcileOptions) (ReconcileReport, error) {
	rep, err := settlement.Reconcile(ctx, db, o)
	if err != nil {
		return rep, err //nolint:wrapcheck // already says "reconcile"
	}
	return rep, nil
}
