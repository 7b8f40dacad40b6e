package rules

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pab-dev/pab/internal/readlimit"
	"github.com/pab-dev/pab/sites"
)

// DefaultSite is the name of the rules that apply to every request (_default.yaml).
const DefaultSite = "_default"

// EmbeddedDefaultPath is the File.Path given to the copy of sites/_default.yaml built into
// the binary.
const EmbeddedDefaultPath = "<embedded>/_default.yaml"

// Set is the rules in effect: every rule file loaded, layered per site. The zero value and
// a nil *Set are usable and hold no rules (nothing dropped, blocked, excluded or latest).
// A Set is read-only after Load and safe for concurrent use.
type Set struct {
	files []*File // load order
	sites []*site // other sites sorted by name, then _default
}

// site is the layered rules of one site name: its files in precedence order (winner
// first), lists combined, single values from the first file that sets them.
type site struct {
	name      string
	isDefault bool
	files     []*File
	hosts     []hostPattern
	drop      []string
	bodyDrop  []string
	dropM     *nameMatcher // drop compiled once the site is built
	bodyDropM *nameMatcher // bodyDrop compiled once the site is built
	block     []location
	exclude   []location
	latest    []location
	xhr       *XHRNotFound
	endpoints []*Endpoint
}

func (st *site) applies(hostPort, hostname string) bool {
	if st.isDefault {
		return true
	}
	for _, h := range st.hosts {
		if h.match(hostPort, hostname) {
			return true
		}
	}
	return false
}

// layerFile is a parsed file with its place in the layering.
type layerFile struct {
	file  *File
	site  string
	auto  bool // <site>.auto.yaml: inferred
	layer int  // index of its directory in Load's arguments
}

// Load reads the rule files of dirs, in increasing precedence: the sites directory first,
// then a task's rules directory (see docs/rules.md). In each directory it reads
// _default.yaml, <site>.yaml (hand-written) and <site>.auto.yaml (inferred); other names
// are ignored, except *.yml, which is an error. A missing directory is skipped. Files are
// read through os.Root: a symlink leading out of its directory is an error, and so is a
// file that is not regular or is larger than MaxFileSize.
//
// Layering per site name: hand-written files win over inferred ones wherever they are;
// among files of the same sort, a later directory wins. The winning file's single values
// (xhr_not_found) are kept and its endpoints come first; lists are combined, duplicates
// removed, in precedence order.
//
// When the first directory has no _default.yaml (or no directory is given), the copy
// embedded in the binary (sites.Default) takes its place.
func Load(dirs ...string) (*Set, error) {
	var files []layerFile
	haveDefault := false
	for layer, dir := range dirs {
		got, err := readRulesDir(dir, layer)
		if err != nil {
			return nil, err
		}
		for _, lf := range got {
			if layer == 0 && lf.site == DefaultSite && !lf.auto {
				haveDefault = true
			}
		}
		files = append(files, got...)
	}
	if !haveDefault {
		f, err := ParseFile(EmbeddedDefaultPath, sites.Default)
		if err != nil {
			return nil, err
		}
		files = append([]layerFile{{file: f, site: DefaultSite}}, files...)
	}
	return build(files)
}

// Default returns the rules of the sites/_default.yaml embedded in the binary.
func Default() (*Set, error) {
	return Load()
}

// listRulesDir opens dir as a root (no path may leave it) and lists its entry names, sorted.
// A missing dir gives a nil root and no error; the caller closes the root.
func listRulesDir(dir string) (*os.Root, []string, error) {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open rules directory %s: %w", dir, err)
	}
	d, err := root.Open(".")
	if err != nil {
		root.Close()
		return nil, nil, fmt.Errorf("open rules directory %s: %w", dir, err)
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		root.Close()
		return nil, nil, fmt.Errorf("list rules directory %s: %w", dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return root, names, nil
}

func readRulesDir(dir string, layer int) ([]layerFile, error) {
	if dir == "" {
		return nil, nil
	}
	root, names, err := listRulesDir(dir)
	if err != nil || root == nil {
		return nil, err
	}
	defer root.Close()
	var out []layerFile
	for _, name := range names {
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, ".yml") {
			return nil, fmt.Errorf("%s: rule files end in .yaml", path)
		}
		stem, ok := strings.CutSuffix(name, ".yaml")
		if !ok {
			continue
		}
		site, auto := strings.CutSuffix(stem, ".auto")
		if site == "" {
			return nil, fmt.Errorf("%s: a rule file is named <site>.yaml or <site>.auto.yaml", path)
		}
		data, err := readRuleFile(root, name, path)
		if err != nil {
			return nil, err
		}
		f, err := ParseFile(path, data)
		if err != nil {
			return nil, err
		}
		if f.Site != "" && f.Site != site {
			return nil, fmt.Errorf("%s: field site is %q but the file name says %q", path, f.Site, site)
		}
		out = append(out, layerFile{file: f, site: site, auto: auto, layer: layer})
	}
	return out, nil
}

// readRuleFile reads name inside root: a regular file (a symlink is followed only while it
// stays inside root) of at most MaxFileSize bytes.
func readRuleFile(root *os.Root, name, path string) ([]byte, error) {
	fi, err := root.Stat(name) // follows symlinks, refusing ones that leave root
	if err != nil {
		return nil, fmt.Errorf("read rule file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read rule file %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s: rule file is %d bytes, more than the limit of %d", path, fi.Size(), MaxFileSize)
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read rule file %s: %w", path, err)
	}
	defer f.Close()
	data, err := readlimit.All(f, MaxFileSize)
	var tl *readlimit.TooLargeError
	switch {
	case errors.As(err, &tl):
		return nil, fmt.Errorf("%s: rule file is more than the limit of %d bytes", path, MaxFileSize)
	case err != nil:
		return nil, fmt.Errorf("read rule file %s: %w", path, err)
	}
	return data, nil
}

// build layers the files into a Set.
func build(files []layerFile) (*Set, error) {
	s := &Set{}
	bySite := map[string][]layerFile{}
	var names []string
	for _, lf := range files {
		s.files = append(s.files, lf.file)
		if _, ok := bySite[lf.site]; !ok {
			names = append(names, lf.site)
		}
		bySite[lf.site] = append(bySite[lf.site], lf)
	}
	slices.SortFunc(names, func(a, b string) int {
		// _default last, the others by name.
		if (a == DefaultSite) != (b == DefaultSite) {
			if a == DefaultSite {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, name := range names {
		lfs := bySite[name]
		// Winner first: hand-written before inferred, then the later directory.
		slices.SortStableFunc(lfs, func(a, b layerFile) int {
			if a.auto != b.auto {
				if a.auto {
					return 1
				}
				return -1
			}
			return b.layer - a.layer
		})
		st := &site{name: name, isDefault: name == DefaultSite}
		for _, lf := range lfs {
			if err := st.add(lf.file); err != nil {
				return nil, err
			}
		}
		st.dropM = compileNames(st.drop)
		st.bodyDropM = compileNames(st.bodyDrop)
		if !st.isDefault && len(st.hosts) == 0 {
			return nil, fmt.Errorf("%s: site %q has no hosts, so its rules apply to no request", st.files[0].Path, name)
		}
		s.sites = append(s.sites, st)
	}
	return s, nil
}

// add merges f, which ranks below the files already added.
func (st *site) add(f *File) error {
	st.files = append(st.files, f)
	if st.isDefault && len(f.Hosts) > 0 {
		return fmt.Errorf("%s: field hosts: _default applies to every host and takes no hosts", f.Path)
	}
	for _, h := range f.Hosts {
		hp, err := compileHostPattern(h)
		if err != nil {
			return fmt.Errorf("%s: field hosts: %q: %w", f.Path, h, err)
		}
		if !slices.Contains(st.hosts, hp) {
			st.hosts = append(st.hosts, hp)
		}
	}
	st.drop = appendNew(st.drop, f.DropParams)
	st.bodyDrop = appendNew(st.bodyDrop, f.BodyDrop)
	var err error
	if st.block, err = appendLocations(st.block, f.Block, f.Path, "block"); err != nil {
		return err
	}
	if st.exclude, err = appendLocations(st.exclude, f.Exclude, f.Path, "exclude"); err != nil {
		return err
	}
	if st.latest, err = appendLocations(st.latest, f.Latest, f.Path, "latest"); err != nil {
		return err
	}
	if st.xhr == nil && f.XHRNotFound != nil {
		st.xhr = f.XHRNotFound
	}
	for _, e := range f.Endpoints {
		if e.pat == nil { // a File built by hand rather than by ParseFile
			pat, err := compileEndpointPattern(e.Match, e.Key)
			if err != nil {
				return fmt.Errorf("%s:%d: endpoint %q: %w", f.Path, e.Line, e.Name, err)
			}
			e.pat = pat
		}
		if e.Host != "" && e.host == nil {
			hp, err := compileHostPattern(e.Host)
			if err != nil {
				return fmt.Errorf("%s:%d: endpoint %q: field host: %q: %w", f.Path, e.Line, e.Name, e.Host, err)
			}
			e.host = &hp
		}
		st.endpoints = append(st.endpoints, e)
	}
	return nil
}

func appendNew(dst, src []string) []string {
	for _, s := range src {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}

func appendLocations(dst []location, src []string, path, field string) ([]location, error) {
	for _, s := range src {
		l, err := compileLocation(s)
		if err != nil {
			return nil, fmt.Errorf("%s: field %s: %q: %w", path, field, s, err)
		}
		if !slices.ContainsFunc(dst, func(x location) bool { return x.text == l.text }) {
			dst = append(dst, l)
		}
	}
	return dst, nil
}

// Files returns every rule file in effect, in load order (directory by directory, names
// sorted; the embedded _default first when it was used).
func (s *Set) Files() []*File {
	if s == nil {
		return nil
	}
	return s.files
}

// target is a request location normalized once for the Set's lookups.
type target struct {
	hostPort, hostname, path string
}

func newTarget(u *url.URL) target {
	var t target
	if u != nil {
		t.hostPort, t.hostname = normHost(u.Host)
	}
	t.path = normPath(urlPath(u))
	return t
}

// Blocked reports whether a `block` pattern matches u: replay answers it with 204 and no
// body. Patterns match the normalized host and path, never the query or the scheme; see
// location for which files' patterns apply.
func (s *Set) Blocked(u *url.URL) bool {
	_, l := s.findLocation(newTarget(u), locBlock)
	return l != nil
}

// Excluded reports whether an `exclude` pattern matches u: such exchanges are never
// replayed (left out of the index), and pab record does not store them (record.Options.Rules);
// an imported recording keeps those it holds.
func (s *Set) Excluded(u *url.URL) bool {
	_, l := s.findLocation(newTarget(u), locExclude)
	return l != nil
}

// Latest reports whether a `latest` pattern matches u: of several recordings of its key,
// the last one answers (carts, checkouts) instead of the earliest.
func (s *Set) Latest(u *url.URL) bool {
	_, l := s.findLocation(newTarget(u), locLatest)
	return l != nil
}

// XHRNotFound returns the `xhr_not_found` answer for a missed API call to host (a host or
// host:port; normalized like the key's host). A site whose hosts match wins over
// _default; among several matching sites, the first by name. ok is false when no rule
// sets one.
func (s *Set) XHRNotFound(host string) (contentType, body string, ok bool) {
	if s == nil {
		return "", "", false
	}
	hp, hn := normHost(host)
	for _, st := range s.sites {
		if st.xhr != nil && st.applies(hp, hn) {
			return st.xhr.ContentType, st.xhr.Body, true
		}
	}
	return "", "", false
}

// maxSites bounds the applicable sites kept on the stack; more spill to the heap.
const maxSites = 8

// applicable returns the sites whose rules apply to the host, other sites by name first,
// _default last.
func (s *Set) applicable(buf []*site, hostPort, hostname string) []*site {
	if s == nil {
		return buf
	}
	for _, st := range s.sites {
		if st.applies(hostPort, hostname) {
			buf = append(buf, st)
		}
	}
	return buf
}

// endpointFor returns the first endpoint of the applicable sites that matches the request,
// with its captures.
func endpointFor(sites []*site, method, hostPort, hostname, path string) (*Endpoint, []string) {
	for _, st := range sites {
		for _, e := range st.endpoints {
			if e.host != nil && !e.host.match(hostPort, hostname) {
				continue
			}
			if caps, ok := e.pat.match(method, path); ok {
				return e, caps
			}
		}
	}
	return nil, nil
}

// Site returns the name of the first site (by name order, _default excluded) whose hosts
// match host ("books.toscrape.com" or "host:port"), or "" when only _default applies.
func (s *Set) Site(host string) string {
	if s == nil {
		return ""
	}
	hp, hn := normHost(host)
	for _, st := range s.sites {
		if !st.isDefault && st.applies(hp, hn) {
			return st.name
		}
	}
	return ""
}

// SiteNames returns the names of the set's sites, sorted, _default excluded.
func (s *Set) SiteNames() []string {
	if s == nil {
		return nil
	}
	var names []string
	for _, st := range s.sites {
		if !st.isDefault {
			names = append(names, st.name)
		}
	}
	return names
}

// SiteApplies reports whether name is a site of the set (not _default) whose hosts match
// host ("books.toscrape.com" or "host:port", compared as the keys compare hosts).
func (s *Set) SiteApplies(name, host string) bool {
	if s == nil || name == DefaultSite {
		return false
	}
	hp, hn := normHost(host)
	for _, st := range s.sites {
		if st.name == name {
			return st.applies(hp, hn)
		}
	}
	return false
}

// HostKey returns host ("name" or "name:port") as the keys write it: lower case, the
// A-label form of an internationalized name (ASCIIHost), no trailing dot, no port 80 or
// 443. Two hosts are the same site host when their HostKeys are equal.
func HostKey(host string) string {
	hp, _ := normHost(host)
	return hp
}
