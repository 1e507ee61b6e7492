// Package statementsample is what the channels' statement builders share:
// a written File and the Statement statements.Parse must return for it,
// the refusal of a line a layout cannot carry (ErrUnwritable), the cell
// and amount checks and formats the writers use, and FromEvents, which
// asks each channel's sample.Bodies.StatementLines for the lines its
// statements report for decoded callbacks. Each channel's writers live in
// its package (wechat.SampleBill, alipay.SampleBill,
// sqb.SampleQueryResponses), each exactly in the layout its parser reads.
//
// The package never touches a database, the network or the file system,
// never imports testing (the channel packages build on it), and it is
// not a parser: the only reader of the files that counts is the channel's
// statement parser.
package statementsample
