// Package statementstest writes channel statement files for tests: a WeChat
// Pay trade bill (bill_type=ALL), an Alipay trade bill zip (GBK, with its
// footer) and a file of Shouqianba query responses, each exactly in the
// layout pkg/statements parses, from the lines the file must parse into.
// FromEvents works out those lines from decoded callbacks the way the
// channels' statements report them.
//
// Every writer returns a File: the bytes and the Statement that
// statements.Parse must return for them, so a test can state "this file
// parses to exactly these lines and totals". The package never touches a
// database, the network or the file system, and it is not a parser: the
// only reader of its files that counts is pkg/statements.
package statementstest
