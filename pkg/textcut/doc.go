// Package textcut cuts text to a byte limit for a column, a header or a
// report: the one place the project truncates a string. Its results are
// always valid UTF-8 and never split a character. It is pure: it imports
// only the standard library, and must never import anything of the
// project's.
package textcut
