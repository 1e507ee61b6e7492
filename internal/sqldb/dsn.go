package sqldb

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// dsnError describes why the driver refused dsn in the driver's words,
// which say which part is wrong (the address, the slash before the database
// name, a parameter's value), unless they would quote any part of the
// password: then only that the DSN is malformed.
func dsnError(dsn string, err error) error {
	msg := err.Error()
	if v, ok := tlsParam(dsn); ok && !builtinTLSMode(v) {
		msg = fmt.Sprintf("tls=%s is not one of the driver's modes (true, false, skip-verify, preferred): "+
			"a CA bundle, client certificate or server name goes in PAYCB_DB_TLS_ENABLED, PAYCB_DB_TLS_CA_FILE, "+
			"PAYCB_DB_TLS_CERT_FILE, PAYCB_DB_TLS_KEY_FILE and PAYCB_DB_TLS_SERVER_NAME", v)
	}
	for _, piece := range passwordPieces(dsn) {
		if strings.Contains(msg, piece) {
			return errors.New("parse mysql dsn: invalid format")
		}
	}
	return fmt.Errorf("parse mysql dsn: %s", msg)
}

// passwordPieces returns the parts of what may be dsn's password (between
// the first colon and the last @ of the user part) that a parser could quote
// on their own: split at the DSN's separators, three characters or more.
// Generous on purpose: a false match costs a vaguer message, a miss a leak.
func passwordPieces(dsn string) []string {
	at := strings.LastIndex(dsn, "@")
	if at < 0 {
		return nil
	}
	colon := strings.Index(dsn[:at], ":")
	if colon < 0 {
		return nil
	}
	var pieces []string
	for _, p := range strings.FieldsFunc(dsn[colon+1:at], func(r rune) bool { return strings.ContainsRune("/?&=@():", r) }) {
		if len(p) >= 3 {
			pieces = append(pieces, p)
		}
	}
	return pieces
}

// tlsParam returns the value of dsn's tls parameter, and whether there is
// one. The parameters follow the first "?" after the slash that follows the
// user part; the value may hold slashes (a file path the driver refuses).
func tlsParam(dsn string) (string, bool) {
	rest := dsn[strings.LastIndex(dsn, "@")+1:]
	slash := strings.Index(rest, "/")
	if slash < 0 {
		return "", false
	}
	q := strings.Index(rest[slash:], "?")
	if q < 0 {
		return "", false
	}
	params, err := url.ParseQuery(rest[slash+q+1:])
	if err != nil || !params.Has("tls") {
		return "", false
	}
	return params.Get("tls"), true
}

// builtinTLSMode reports whether v is a tls= value the driver understands
// without a registered configuration.
func builtinTLSMode(v string) bool {
	switch strings.ToLower(v) {
	case "true", "false", "skip-verify", "preferred", "1", "0":
		return true
	}
	return false
}
