// Package merchantbinding is the merchant binding: which tenant each
// merchant (WeChat mchid, Alipay PID, Shouqianba terminal) belongs to, per
// channel, parsed from the file PAYCB_TENANT_MERCHANTS_FILE names
// (config.Worker.TenantMerchantsFile) and kept current while the worker
// runs (internal/watchfile). The worker checks each callback's merchant
// against it, and the statement book each statement's.
//
// It reads only the file it is given; it must never read the environment
// or the configuration: config holds the path, and the wiring
// (internal/app, cmd/consumer) loads the file here.
package merchantbinding
