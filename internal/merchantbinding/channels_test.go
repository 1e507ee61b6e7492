package merchantbinding

// The binding names channels by code and checks them against the channel
// registry, which the binaries fill by importing allchannels; so do these
// tests.
import _ "github.com/paycallback/paycallback/pkg/channels/allchannels"
