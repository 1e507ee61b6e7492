package app

import (
	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/channelkeys"
	"github.com/paycallback/paycallback/internal/merchantbinding"
	"github.com/paycallback/paycallback/internal/statementauth"
)

// FileChecks returns the checks config.Config.Validate runs on the files a
// configuration names, each read by the package that owns its format as
// the worker reads it: the statement keys (statementauth.Load) and the
// merchant binding (merchantbinding.Load) and the channels' public keys
// (channelkeys.Load).
func FileChecks() config.FileChecks {
	return config.FileChecks{
		StatementKeys: func(path string) error {
			_, err := statementauth.Load(path)
			return err
		},
		MerchantBinding: func(path string) error {
			_, err := merchantbinding.Load(path)
			return err
		},
		ChannelPublicKeys: func(path string) error {
			_, err := channelkeys.Load(path)
			return err
		},
	}
}
