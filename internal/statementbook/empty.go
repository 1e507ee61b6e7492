package statementbook

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/paycallback/paycallback/internal/sqldb"
	"github.com/paycallback/paycallback/pkg/channels"
	"github.com/paycallback/paycallback/pkg/statements"
)

// FormatDeclaredEmpty is the format of the day row of a statement day
// declared empty: the channel answered that there was no statement (WeChat
// NO_STATEMENT_EXIST, Alipay EMPTY_DATA_WITH_BILL_FILE, no Shouqianba order).
const FormatDeclaredEmpty = "declared-empty"

// The outcomes of declaring one day's statement empty.
const (
	// EmptyDeclared: nothing was held for the day; it now holds an empty
	// statement.
	EmptyDeclared = "declared"
	// EmptyAlready: the day already held a statement without lines
	// (declared empty before, or an empty bill imported); nothing changed.
	EmptyAlready = "already_empty"
)

// ErrStatementHeld is wrapped by DeclareEmptyStatements' error when a day
// already holds statement lines: the channel's statement of it is not
// empty.
var ErrStatementHeld = errors.New("the day holds statement lines")

// EmptyDay is what declaring one day empty did.
type EmptyDay struct {
	Day    string `json:"day"`
	Status string `json:"status"`
}

// DeclareEmptyStatements records, for tenant and channel ch, that each
// Beijing-time day of days (YYYY-MM-DD) has no statement: the channel said
// there was none. Reconcile then compares the day with an empty statement,
// so any posting dated to it is missing_in_statement, and the day counts as
// a statement held in the metrics. A day holding nothing gets a day row of
// format FormatDeclaredEmpty with no lines (a statement imported for it
// later is stored as for any day); a day holding a statement without lines
// is left as it is. All the days are written in one transaction: when one
// of them holds lines, the error wraps ErrStatementHeld, names it, and
// nothing is recorded. A day that has not ended at now is refused.
func DeclareEmptyStatements(ctx context.Context, db *bun.DB, tenant int64, ch channels.Channel, days []string, now time.Time) ([]EmptyDay, error) {
	if tenant <= 0 {
		return nil, fmt.Errorf("declare empty statements: tenant %d: must be positive", tenant)
	}
	for _, day := range days {
		start, err := time.ParseInLocation(time.DateOnly, day, statements.Beijing)
		if err != nil {
			return nil, fmt.Errorf("declare empty statements: day %q: %w", day, err)
		}
		if end := start.AddDate(0, 0, 1); end.After(now) {
			return nil, fmt.Errorf("declare empty statements: %s has not ended (it ends at %s)", day, end.Format(time.RFC3339))
		}
	}
	out := make([]EmptyDay, 0, len(days))
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		out = out[:0]
		for _, day := range days {
			var held statementFile
			q := tx.NewSelect().Model(&held).
				Where("tenant_id = ?", tenant).Where("channel_code = ?", string(ch)).Where("statement_day = ?", day)
			if !sqldb.IsSQLite(tx) {
				q = q.For("UPDATE")
			}
			err := q.Scan(ctx)
			switch {
			case err == nil && held.LineCount > 0:
				return fmt.Errorf("%s: %d lines held (format %s, sha1 %s): %w", day, held.LineCount, held.Format, held.SHA1, ErrStatementHeld)
			case err == nil:
				out = append(out, EmptyDay{Day: day, Status: EmptyAlready})
				continue
			case !errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("read the statement held for %s: %w", day, err)
			}
			row := statementFile{
				TenantID: tenant, ChannelCode: string(ch), StatementDay: day, Format: FormatDeclaredEmpty,
				ImportedAt: now.UTC(), Version: dayVersion(nil),
			}
			if _, err := tx.NewInsert().Model(&row).Exec(ctx); err != nil {
				return fmt.Errorf("record %s empty: %w", day, err)
			}
			out = append(out, EmptyDay{Day: day, Status: EmptyDeclared})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("declare empty statements: tenant %d %s: %w", tenant, ch, err)
	}
	return out, nil
}
