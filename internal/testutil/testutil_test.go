package testutil

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/drillhq/drill/internal/scenario"
)

func TestPostgresAndHTTPStub(t *testing.T) {
	pg := PostgresWith(t, scenario.PostgresDep{InitSQL: "CREATE TABLE orders (id int)"})
	ctx := context.Background()
	c, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "INSERT INTO orders VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	s := HTTPStub(t, scenario.HTTPStubDep{Status: 202})
	resp, err := http.Get(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
