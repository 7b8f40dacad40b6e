package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/net/http/httpguts"

	"github.com/pab-dev/pab/replay"
	"github.com/pab-dev/pab/rules"
)

func newInspectCmd(g *globalFlags) *cobra.Command {
	var (
		method      string
		body        string
		contentType string
		asJSON      bool
		reqType     string
	)
	cmd := &cobra.Command{
		Use:   "inspect TARGET URL",
		Short: "Show the matching key of a request and the recorded exchange it hits",
		Long: `Show how replay would answer a request: its normalized key under the rules in
effect, the rules endpoint that applies, each lookup step tried (blocked, exact,
search, promo, fuzzy, miss) with its outcome, the recordings the matching policy
refused (one line each, with the reason), the rule file and line that decided, and
the recorded exchange it hits, or the nearest recorded candidates when it misses. TARGET is as for 'pab replay'. --json prints the same as one JSON object.`,
		Example: `  pab inspect books-sapiens-price "http://books.toscrape.com/?utm_source=x"
  pab inspect tasks/archive-org-jobs "http://www.archive.org/about/faq.php?faq_id=999"
  pab inspect my-task https://httpbin.org/post --method POST --body 'foo=bar' --content-type application/x-www-form-urlencoded`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := url.Parse(args[1])
			if err != nil {
				return fmt.Errorf("inspect: URL %q: %v", args[1], errors.Unwrap(err))
			}
			if u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
				return fmt.Errorf("inspect: %q is not an absolute http:// or https:// URL", args[1])
			}
			if !httpguts.ValidHeaderFieldName(method) { // a method is an HTTP token
				return fmt.Errorf("inspect: --method %q is not an HTTP method", method)
			}
			switch reqType {
			case "", replay.TypeDocument, replay.TypeImage, replay.TypeFont, replay.TypeStyle, replay.TypeScript, replay.TypeAPI, replay.TypeMedia, replay.TypeOther:
			default:
				return fmt.Errorf("inspect: --type %q is not a request type (document, image, font, style, script, api, media, other)", reqType)
			}
			s, err := openSession(g, args[0], cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer s.close()
			req := rules.Request{Method: strings.ToUpper(method), URL: u, Body: []byte(body), ContentType: contentType, Type: reqType}
			ex := s.index.Explain(req)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(ex)
			}
			ex.Print(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVar(&method, "method", "GET", "request method")
	cmd.Flags().StringVar(&body, "body", "", "request body")
	cmd.Flags().StringVar(&contentType, "content-type", "", "request Content-Type (how the body is normalized: JSON, form, or other)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the explanation as JSON")
	cmd.Flags().StringVar(&reqType, "type", "", "the request's type as replay's log names it (document for a page a browser opens, image, script, api, ...); the fuzzy step is stricter for documents")
	return cmd
}
