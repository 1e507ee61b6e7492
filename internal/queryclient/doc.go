// Package queryclient sends the querier's signed requests to the
// channels' APIs and returns their answers exactly as received: it finds a
// target's credentials, builds and signs the request through the
// channel's Spec (channels.Spec.BuildQuery), sends it over TLS (the system
// roots plus PAYCB_QUERY_TLS_CA_FILE), and hands back the status, headers
// and raw body with the time they came (channels.QueryResponse). It reads
// no answer: verifying and reading is the channel's (its ReadAnswer), and
// what to do next is the querier's.
//
// It must never follow a redirect (the signed request names one URL; an
// answer from elsewhere proves nothing), talk plain HTTP, read an answer
// without a size cap, retry on its own, or put key material or a request's
// signature into an error. Errors tell "no answer" (ErrTransport) from an
// answer it will not hand back (ErrRedirect, ErrTooLarge).
package queryclient
