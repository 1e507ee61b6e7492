// Package querycreds reads the querier's API credentials
// (PAYCB_QUERY_CREDENTIALS_FILE): a YAML list of {tenant_id, channel,
// merchant_id, …} entries, each channel's own fields and key files read by
// the channel's package (channels.Spec.ParseQueryCredentials), relative
// *_file paths resolved against the list's directory. File keeps them
// current while the querier runs: the list and every key file it names are
// read again on each Refresh, so a rotated key (a Shouqianba terminal key
// is rotated daily) is in force without a restart.
//
// The credentials can move money out. This package must never be used by
// the worker (consumer run), never put key material in an error or a log
// line (errors name the entry, its line and the field), and never make a
// half-read file current: a list that fails leaves the last good one in
// force.
package querycreds
