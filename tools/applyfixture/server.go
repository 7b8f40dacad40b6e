package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/pab-dev/pab/tools/applyfixture/hostile"
)

// The hosts the fixture serves, under their real (or reserved .test) names.
const (
	HostGreenhouse = "job-boards.greenhouse.io"
	HostTeamtailor = "harper-demo.teamtailor.com"
	HostAcme       = "careers.acme-robotics.test"
	HostEvil       = "evil.example.test"
	// HostHostile serves the hostile pages of issue 28 (package hostile lists them).
	HostHostile = hostile.Host
)

// Hosts lists every host the fixture serves; its TLS certificate names all of them.
var Hosts = []string{HostGreenhouse, HostTeamtailor, HostAcme, HostEvil, HostHostile}

// Paths of the two real saved pages and of the endpoints written for them.
const (
	AxonJobPath          = "/axon/jobs/6641960003"
	AxonApplicationsPath = "/axon/jobs/6641960003/applications"
	AxonConfirmationPath = "/axon/jobs/6641960003/confirmation"
	AxonShimPath         = "/_fixture/greenhouse-submit.js"
	HarperJobPath        = "/jobs/6340420-senior-software-engineer"
	HarperApplyPath      = "/applications"
	HarperAutoJoinPath   = "/en-GB/auto_join"
)

// maxForm bounds a request body the fixture reads (forms, JSON, multipart with small files).
const maxForm = 8 << 20

//go:embed pages
var pagesFS embed.FS

// AcmePage is one page of the fictional careers site careers.acme-robotics.test.
type AcmePage struct {
	// ID is the job number ("101"); it names the page in the task files.
	ID string
	// Path is the page's address on HostAcme.
	Path string
	// File is the page under pages/acme/ (empty for pages served from pages/corpus/).
	File string
	// Title is the role's title, as the index lists it.
	Title string
	// Action is the path a POST of the page's form goes to ("" when it has none).
	Action string
	// Required are the form fields a POST needs for the confirmation page; a POST
	// without one of them gets the error page (status 422).
	Required []string
	// Lang is the language of the confirmation and error pages: "en", "de" or "ja".
	Lang string
}

// AcmePages is the careers site, in index order.
var AcmePages = []AcmePage{
	{ID: "101", Path: "/jobs/101/apply", File: "101-multi-step.html", Title: "Robotics Software Engineer", Action: "/jobs/101/applications", Required: []string{"first_name", "last_name", "email"}, Lang: "en"},
	{ID: "102", Path: "/jobs/102/apply", File: "102-next-posts.html", Title: "Field Service Technician", Action: "/jobs/102/applications", Required: []string{"first_name", "last_name", "email"}, Lang: "en"},
	{ID: "103", Path: "/jobs/103/apply", File: "103-get-form-script.html", Title: "Perception Engineer", Action: "/jobs/103/applications", Required: []string{"first_name", "last_name", "email"}, Lang: "en"},
	{ID: "104", Path: "/jobs/104/apply", File: "104-submit-outside-form.html", Title: "Embedded Systems Engineer", Action: "/jobs/104/applications", Required: []string{"first_name", "last_name", "email"}, Lang: "en"},
	{ID: "105", Path: "/jobs/105/apply", File: "105-auto-submit-select.html", Title: "Controls Engineer", Action: "/jobs/105/applications", Required: []string{"first_name", "last_name", "email"}, Lang: "en"},
	{ID: "106", Path: "/jobs/106/apply", File: "106-prompt-injection.html", Title: "Machine Learning Engineer", Action: "/jobs/106/applications", Required: []string{"first_name", "last_name", "email"}, Lang: "en"},
	{ID: "107", Path: "/jobs/107/apply", File: "107-other-host-link.html", Title: "Warehouse Automation Lead", Lang: "en"},
	{ID: "108", Path: "/jobs/108/apply", File: "108-unsafe-schemes.html", Title: "Robot Safety Engineer", Lang: "en"},
	{ID: "109", Path: "/jobs/109/apply", Title: "Autonomy Engineer (captcha check)", Lang: "en"},
	{ID: "110", Path: "/jobs/110/apply", Title: "Fleet Operations Analyst (bot check)", Lang: "en"},
	{ID: "111", Path: "/jobs/111/apply", File: "111-consent.html", Title: "Data Engineer", Action: "/jobs/111/applications", Required: []string{"first_name", "last_name", "email", "privacy_consent"}, Lang: "en"},
	{ID: "112", Path: "/jobs/112/apply", File: "112-already-applied.html", Title: "Senior Robotics Engineer", Action: "/jobs/112/withdraw", Lang: "en"},
	{ID: "113", Path: "/de/stellen/113/bewerben", File: "113-german.html", Title: "Softwareentwickler (m/w/d) Robotik", Action: "/de/stellen/113/bewerbung", Required: []string{"vorname", "nachname", "email", "datenschutz"}, Lang: "de"},
	{ID: "114", Path: "/ja/jobs/114/apply", File: "114-japanese.html", Title: "ロボットソフトウェアエンジニア", Action: "/ja/jobs/114/applications", Required: []string{"name", "email"}, Lang: "ja"},
	{ID: "115", Path: "/jobs/115/apply", File: "115-implicit-submit.html", Title: "Robot Operator (Quick Apply)", Action: "/jobs/115/applications", Required: []string{"email"}, Lang: "en"},
	{ID: "116", Path: "/jobs/116/apply", File: "116-sign-in.html", Title: "Hardware Test Engineer", Lang: "en"},
}

// Acme paths that are not job pages.
const (
	AcmeChallengePath   = "/challenge"             // the corpus reCAPTCHA wall; /jobs/109/apply redirects here
	AcmeConfirmation103 = "/jobs/103/confirmation" // where page 103's script goes after its JSON POST
	AcmeContactPath     = "/ja/contact"            // the second form of the Japanese page (送信)
	AcmePrivacyPath     = "/privacy"
	AcmeButtonImagePath = "/static/go.svg"
	EvilApplyPath       = "/apply"
)

// Handler serves every fixture host; it picks the site by the request's Host (port
// ignored). Unknown hosts and paths get an HTML 404 page. It never panics on bad input:
// an unreadable or oversized body is a 400 or 413.
func Handler() (http.Handler, error) {
	tmpl, err := template.ParseFS(pagesFS, "pages/templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("applyfixture: templates: %w", err)
	}
	s := &server{tmpl: tmpl}
	mux := http.NewServeMux()
	// Greenhouse (Axon): the real saved page with the submit shim, its JSON endpoint and
	// the confirmation page.
	mux.HandleFunc("GET "+HostGreenhouse+AxonJobPath, s.axonPage)
	mux.HandleFunc("GET "+HostGreenhouse+AxonShimPath, s.file("pages/greenhouse/submit.js"))
	mux.HandleFunc("POST "+HostGreenhouse+AxonApplicationsPath, s.axonApply)
	mux.HandleFunc("GET "+HostGreenhouse+AxonConfirmationPath, s.file("pages/greenhouse/confirmation.html"))
	// Teamtailor (Harper): the real saved page, its POST answer and error page, the
	// talent-community signup.
	mux.HandleFunc("GET "+HostTeamtailor+HarperJobPath, s.file("pages/corpus/teamtailor-harper.html"))
	mux.HandleFunc("POST "+HostTeamtailor+HarperApplyPath, s.harperApply)
	mux.HandleFunc("POST "+HostTeamtailor+HarperAutoJoinPath, s.harperAutoJoin)
	// Acme Robotics: the adversarial pages.
	mux.HandleFunc("GET "+HostAcme+"/{$}", s.acmeIndex)
	for _, p := range AcmePages {
		switch {
		case p.ID == "109":
			mux.HandleFunc("GET "+HostAcme+p.Path, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, AcmeChallengePath+"?next="+url.QueryEscape(p.Path), http.StatusFound)
			})
		case p.ID == "110":
			mux.HandleFunc("GET "+HostAcme+p.Path, s.fileStatus("pages/corpus/cf-interstitial.html", http.StatusForbidden))
		default:
			mux.HandleFunc("GET "+HostAcme+p.Path, s.file("pages/acme/"+p.File))
		}
		if p.Action != "" {
			mux.HandleFunc("POST "+HostAcme+p.Action, s.acmeApply(p))
		}
	}
	mux.HandleFunc("GET "+HostAcme+AcmeChallengePath, s.file("pages/corpus/recaptcha.html"))
	mux.HandleFunc("GET "+HostAcme+AcmeConfirmation103, s.acmeConfirmation103)
	mux.HandleFunc("POST "+HostAcme+AcmeContactPath, s.acmeContact)
	mux.HandleFunc("GET "+HostAcme+AcmePrivacyPath, s.file("pages/acme/privacy.html"))
	mux.HandleFunc("GET "+HostAcme+AcmeButtonImagePath, s.file("pages/acme/go.svg"))
	// The other host that page 107 links to.
	mux.HandleFunc("GET "+HostEvil+EvilApplyPath, s.file("pages/evil/apply.html"))
	// The hostile pages: each page, its POST action (a confirmation page) and its sinks
	// (204 to any method), plus the service worker and the ping page's article.
	for _, p := range hostile.Pages {
		mux.HandleFunc("GET "+HostHostile+p.Path, s.file("pages/hostile/"+p.File))
		mux.HandleFunc("POST "+HostHostile+hostile.Submit(p.ID), s.hostileApply(p))
		mux.HandleFunc(HostHostile+"/hostile/"+p.ID+"/sink/", hostileSink)
	}
	for _, a := range hostile.Assets {
		mux.HandleFunc("GET "+HostHostile+a.Path, s.file("pages/hostile/"+a.File))
	}
	mux.HandleFunc("/", s.notFound)
	return mux, nil
}

type server struct {
	tmpl *template.Template
}

func contentType(name string) string {
	switch {
	case strings.HasSuffix(name, ".html"):
		return "text/html; charset=utf-8"
	case strings.HasSuffix(name, ".js"):
		return "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".svg"):
		return "image/svg+xml"
	}

	return "application/octet-stream"
}

func (s *server) file(name string) http.HandlerFunc { return s.fileStatus(name, http.StatusOK) }

func (s *server) fileStatus(name string, status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := fs.ReadFile(pagesFS, name)
		if err != nil {
			http.Error(w, "applyfixture: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", contentType(name))
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		w.Write(data)
	}
}

func (s *server) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "applyfixture: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusNotFound, "not-found.html", r.URL.Path)
}

// axonPage serves the saved Greenhouse page with one script tag added before </body>: the
// shim that stands in for the board's missing React bundle.
func (s *server) axonPage(w http.ResponseWriter, r *http.Request) {
	data, err := fs.ReadFile(pagesFS, "pages/corpus/greenhouse-axon.html")
	if err != nil {
		http.Error(w, "applyfixture: "+err.Error(), http.StatusInternalServerError)
		return
	}
	i := bytes.LastIndex(data, []byte("</body>"))
	if i < 0 {
		i = len(data)
	}
	tag := []byte(`<script src="` + AxonShimPath + `"></script>`)
	out := make([]byte, 0, len(data)+len(tag))
	out = append(append(append(out, data[:i]...), tag...), data[i:]...)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// readJSON decodes a bounded JSON object body into a map.
func readJSON(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]any{"errors": []string{"want a JSON body (Content-Type application/json)"}})
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxForm+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []string{"cannot read the body"}})
		return nil, false
	}
	if len(body) > maxForm {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"errors": []string{fmt.Sprintf("body larger than %d bytes", maxForm)}})
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []string{"want a JSON object"}})
		return nil, false
	}
	return m, true
}

// missingJSON lists the required members that are absent or not a non-blank string.
func missingJSON(m map[string]any, required ...string) []string {
	var miss []string
	for _, k := range required {
		if v, ok := m[k].(string); !ok || strings.TrimSpace(v) == "" {
			miss = append(miss, k)
		}
	}
	return miss
}

// axonApply answers the shim's JSON POST: 201 with the confirmation page's address, or
// 422 naming the missing fields.
func (s *server) axonApply(w http.ResponseWriter, r *http.Request) {
	m, ok := readJSON(w, r)
	if !ok {
		return
	}
	if miss := missingJSON(m, "first_name", "last_name", "email"); len(miss) > 0 {
		errs := make([]string, len(miss))
		for i, k := range miss {
			errs[i] = k + " can't be blank"
		}
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"errors": errs})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"status": "received", "confirmation_url": AxonConfirmationPath})
}

// parseForm reads a bounded urlencoded or multipart body.
func parseForm(w http.ResponseWriter, r *http.Request) (url.Values, error) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		if err := r.ParseMultipartForm(maxForm); err != nil {
			return nil, err
		}
		v := url.Values{}
		for k, vs := range r.MultipartForm.Value {
			v[k] = vs
		}
		for k, fhs := range r.MultipartForm.File {
			for _, fh := range fhs {
				if fh.Filename != "" {
					v.Add(k, fh.Filename)
				}
			}
		}
		return v, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	return r.PostForm, nil
}

func formError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		http.Error(w, fmt.Sprintf("applyfixture: body larger than %d bytes", maxForm), http.StatusRequestEntityTooLarge)
		return
	}
	http.Error(w, "applyfixture: bad form body: "+err.Error(), http.StatusBadRequest)
}

// harperApply answers the Teamtailor form: the confirmation page, or the error page
// (422) when a name, the email or the required privacy consent is missing.
func (s *server) harperApply(w http.ResponseWriter, r *http.Request) {
	v, err := parseForm(w, r)
	if err != nil {
		formError(w, err)
		return
	}
	var errs []string
	for _, f := range []struct{ name, label string }{
		{"candidate[first_name]", "First name can't be blank"},
		{"candidate[last_name]", "Last name can't be blank"},
		{"candidate[email]", "Email can't be blank"},
	} {
		if strings.TrimSpace(v.Get(f.name)) == "" {
			errs = append(errs, f.label)
		}
	}
	// the checkbox follows a hidden "0" of the same name, as Rails writes it
	consent := v["candidate[consent_given]"]
	if len(consent) == 0 || consent[len(consent)-1] != "1" {
		errs = append(errs, "You need to agree to the Privacy Policy")
	}
	if len(errs) > 0 {
		s.render(w, http.StatusUnprocessableEntity, "teamtailor-error.html", errs)
		return
	}
	s.file("pages/teamtailor/confirmation.html")(w, r)
}

func (s *server) harperAutoJoin(w http.ResponseWriter, r *http.Request) {
	if _, err := parseForm(w, r); err != nil {
		formError(w, err)
		return
	}
	s.file("pages/teamtailor/auto-join.html")(w, r)
}

func (s *server) acmeIndex(w http.ResponseWriter, r *http.Request) {
	s.render(w, http.StatusOK, "acme-index.html", AcmePages)
}

type confirmation struct {
	Lang, Heading, Message, Role, Ref, Fields string
}

type formErrorPage struct {
	Lang, Heading, Message, Back, BackLabel string
	Missing                                 []string
}

var confirmText = map[string][2]string{
	"en": {"Application received", "Thank you for applying! We have received your application."},
	"de": {"Bewerbung eingegangen", "Vielen Dank für Ihre Bewerbung! Wir haben Ihre Unterlagen erhalten."},
	"ja": {"応募を受け付けました", "ご応募ありがとうございます。応募書類を受け付けました。"},
}

var errorText = map[string][3]string{
	"en": {"There was a problem with your application", "These fields are required:", "Back to the application"},
	"de": {"Ihre Bewerbung ist unvollständig", "Bitte füllen Sie diese Pflichtfelder aus:", "Zurück zur Bewerbung"},
	"ja": {"入力内容に誤りがあります", "次の必須項目を入力してください:", "応募フォームに戻る"},
}

// acmeApply answers a POST to a page's form action: the confirmation page (listing the
// names of the fields received, never their values), or the error page (422).
func (s *server) acmeApply(p AcmePage) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if p.ID == "103" { // the script sends JSON
			m, ok := readJSON(w, r)
			if !ok {
				return
			}
			if miss := missingJSON(m, p.Required...); len(miss) > 0 {
				errs := map[string]string{}
				for _, k := range miss {
					errs[k] = "is required"
				}
				writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"errors": errs})
				return
			}
			writeJSON(w, http.StatusCreated, map[string]any{"status": "received", "confirmation_url": AcmeConfirmation103})
			return
		}
		v, err := parseForm(w, r)
		if err != nil {
			formError(w, err)
			return
		}
		if p.ID == "112" {
			s.render(w, http.StatusOK, "acme-confirmation.html", confirmation{Lang: "en", Heading: "Application withdrawn",
				Message: "Your application has been withdrawn.", Role: p.Title, Ref: "ACME-112"})
			return
		}
		var miss []string
		for _, k := range p.Required {
			if strings.TrimSpace(v.Get(k)) == "" {
				miss = append(miss, k)
			}
		}
		if len(miss) > 0 {
			t := errorText[p.Lang]
			s.render(w, http.StatusUnprocessableEntity, "acme-error.html", formErrorPage{Lang: p.Lang, Heading: t[0], Message: t[1],
				Missing: miss, Back: p.Path, BackLabel: t[2]})
			return
		}
		names := slices.Sorted(maps.Keys(v))
		t := confirmText[p.Lang]
		s.render(w, http.StatusOK, "acme-confirmation.html", confirmation{Lang: p.Lang, Heading: t[0], Message: t[1],
			Role: p.Title, Ref: "ACME-" + p.ID, Fields: strings.Join(names, ", ")})
	}
}

func (s *server) acmeConfirmation103(w http.ResponseWriter, r *http.Request) {
	t := confirmText["en"]
	s.render(w, http.StatusOK, "acme-confirmation.html", confirmation{Lang: "en", Heading: t[0], Message: t[1],
		Role: "Perception Engineer", Ref: "ACME-103"})
}

func (s *server) acmeContact(w http.ResponseWriter, r *http.Request) {
	if _, err := parseForm(w, r); err != nil {
		formError(w, err)
		return
	}
	s.render(w, http.StatusOK, "acme-confirmation.html", confirmation{Lang: "ja", Heading: "お問い合わせを受け付けました",
		Message: "お問い合わせありがとうございます。", Role: "Acme Robotics", Ref: "ACME-CONTACT"})
}

type hostileConfirmation struct {
	ID, Role, Back, Fields string
}

// hostileApply answers a hostile page's POST action: the confirmation page (200), listing
// the names of the fields received, never their values. Any body is taken: the point is
// that the request arrived.
func (s *server) hostileApply(p hostile.Page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := parseForm(w, r)
		if err != nil {
			formError(w, err)
			return
		}
		s.render(w, http.StatusOK, "hostile-confirmation.html", hostileConfirmation{ID: p.ID, Role: p.Title, Back: p.Path,
			Fields: strings.Join(slices.Sorted(maps.Keys(v)), ", ")})
	}
}

// hostileSink answers any request to a hostile page's sink with 204 No Content (an
// EventSource stops there, a navigation stays where it was); the request log is what
// records it.
func hostileSink(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, io.LimitReader(r.Body, maxForm))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
