package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pab-dev/pab/internal/browser"
	"github.com/pab-dev/pab/tlsca"
)

func newCACmd(g *globalFlags) *cobra.Command {
	var spki bool
	cmd := &cobra.Command{
		Use:   "ca",
		Short: "Print the path of pab's CA certificate (PEM), creating the CA on first use",
		Long: `Print the path of the certificate (PEM) of the CA that pab's replay proxy signs
its HTTPS certificates with. The CA is an ECDSA P-256 key made once per user and shared by every
repository and directory: it is kept in $PAB_CA_DIR when set, else in
$PAB_CACHE/ca when PAB_CACHE is set (pods, tests), else in
$XDG_DATA_HOME/pab/ca (default ~/.local/share/pab/ca). Give the certificate to the
client that goes through the proxy (curl --cacert, an NSS database, NODE_EXTRA_CA_CERTS),
or give Chromium its SPKI hash (--spki).`,
		Example: `  curl --proxy http://127.0.0.1:8899 --cacert "$(pab ca)" https://lil.law.harvard.edu/projects/
  # Chromium through a replay or recording proxy (` + browser.NoSandboxNote + `):
  ` + chromiumLine("https://lil.law.harvard.edu/projects/"),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ca, err := tlsca.LoadDefault()
			if err != nil {
				return err
			}
			if spki {
				fmt.Fprintln(cmd.OutOrStdout(), ca.SPKIHash())
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), ca.CertPath())
			return nil
		},
	}
	cmd.Flags().BoolVar(&spki, "spki", false, "print the base64 SHA-256 hash of the CA's public key instead (for Chromium's --ignore-certificate-errors-spki-list)")
	return cmd
}

// chromiumLine is the Chromium command line of the help examples: internal/browser's one
// command line (browser.ShellCommand) through a proxy on 127.0.0.1:8899, trusting pab's CA
// by its SPKI hash, with a fresh profile and a window, opening url.
func chromiumLine(url string) string {
	return browser.ShellCommand(browser.Options{Proxy: "127.0.0.1:8899", SPKI: "$(pab ca --spki)",
		Profile: "$(mktemp -d)", Headed: true}, url, "    ")
}
