// Package registrations reads and steers the registrations that no
// callback has settled yet: payment registrations (ss_payment_registration,
// written by settlement.Service.RegisterPayment) and refund registrations
// (ss_refund_request, settlement.Service.RegisterRefund). It is what the
// querier (consumer query run) and the operators' views need: the open
// registrations past their first wait, oldest first (Store.Open); the
// querier's conditional moves to ABNORMAL, CLOSED or EXPIRED
// (Store.SetPaymentStatus, Store.SetRefundStatus); and the standings per
// channel and kind behind paycb_registrations_open,
// paycb_registration_oldest_open_seconds,
// paycb_registrations_past_expiry and consumer status (Store.Stats); and
// the worker's closing of a registration on a closed query answer
// (Closer, the pipeline's QueryCloser).
//
// What this package must never do: insert a registration, make one
// SUCCEEDED (only a settlement of its money does that, in the
// settlement's transaction, or settlement.Service.SettleFromOrders from a
// posted payment), or change a registration whose status is not the one
// the move starts from: every update is conditional on the current status.
package registrations
