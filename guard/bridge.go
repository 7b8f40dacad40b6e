package guard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/text/unicode/norm"
)

// Browser is the browser MCP server behind the guard (the child @playwright/mcp, or a fake in
// tests). ListTools returns the child's tools with their raw input schemas; CallTool forwards one
// call. A transport failure is a Go error; a tool-level failure is a result with IsError.
type Browser interface {
	ListTools(ctx context.Context) ([]*mcp.Tool, error)
	CallTool(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error)
}

// PauseRequest asks a person to act. Reason is one of pauseReasons (captcha, login_required,
// consent_required, missing_answer, screening_ambiguity, external_redirect,
// duplicate_application, anti_bot) or "sensitive_page". Question is at most 300 characters;
// URL and Domain name the page concerned when there is one.
type PauseRequest struct {
	Reason   string `json:"reason"`
	Question string `json:"question,omitempty"`
	URL      string `json:"url,omitempty"`
	Domain   string `json:"domain,omitempty"`
}

// PauseOutcome is how a pause ended.
type PauseOutcome struct {
	Resumed bool   // false: cancelled (or the context ended)
	Answer  string // with Resumed: the owner's answer (joins the grounding sources), may be ""
	// AllowSite, with Resumed at an external_redirect pause, is the host the owner admits
	// for the rest of the run (the pause's Domain); the guard then opens the page again and
	// checks it as any other. "" admits nothing.
	AllowSite string
}

// Pauser waits for a person. It must return when ctx ends.
type Pauser interface {
	Pause(ctx context.Context, p PauseRequest) PauseOutcome
}

// Config builds a Bridge. App, Browser and Pauser are required; Trace nil discards events.
type Config struct {
	App     *Application
	Browser Browser
	Pauser  Pauser
	Trace   *Tracer          // JSONL trace writer (trace.go)
	Now     func() time.Time // nil = time.Now
	// LockToken, when set, is the token of the submit lock (SubmitLockScript) the browser
	// runs in every page: the Bridge arms the lock with it only around an allowed auto_submit
	// click. "" = no lock installed (e.g. a --browser-mcp server).
	LockToken string
	// UploadDir, when set, is a directory the browser may read files from (e.g.
	// @playwright/mcp's output directory): each approved artifact is copied there from the
	// bytes just hashed, and that copy is uploaded. "" = the artifact's own path is uploaded.
	UploadDir string
	// OwnerBrowser says the owner sees and can use the browser (pab guard --headed or
	// --cdp-endpoint): at a consent pause the owner ticks the box there and the guard
	// rechecks it; false (headless), the owner's resume is their approval and the guard
	// ticks it for them (see Bridge.consent).
	OwnerBrowser bool
}

// SubmitLockScript is a script for the browser to run in every page before the page's own
// scripts (@playwright/mcp's browser.initScript). Until armed with token it refuses every
// POST a page could make: HTMLFormElement submit() and requestSubmit() of a POST form throw,
// the "submit" event of a POST form is cancelled in the capture phase (so no native
// submission either; GET forms only navigate and are left alone), and fetch, XMLHttpRequest
// and navigator.sendBeacon refuse any method but GET and HEAD. Each refused
// attempt is counted; inspectPageJS takes the count, and the Bridge traces it as a refusal
// (reason script_submit). token must be letters and digits (NewLockToken).
func SubmitLockScript(token string) string {
	return strings.Replace(submitLockJS, "@TOKEN@", token, 1)
}

// NewLockToken returns a random token for SubmitLockScript (32 hex digits).
func NewLockToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

const submitLockJS = `(() => {
  if (window.__pabGuardLock) return;
  const token = "@TOKEN@";
  let armed = false;
  let blocked = 0;
  const refuse = (what) => { blocked++; return new Error("pab guard: " + what + " refused (a submit needs the owner's approval)"); };
  const def = (name, fn) => Object.defineProperty(window, name, { value: fn, writable: false, configurable: false, enumerable: false });
  def("__pabGuardLock", (t, on) => { if (t === token) armed = !!on; return armed; });
  def("__pabGuardTake", () => { const n = blocked; blocked = 0; return n; });
  // GETs carrying a value typed in this run: the guard gives [length, hash] pairs of the
  // typed values (canonical form, FNV-1a over code points), never the values themselves
  let typed = [];
  let leaked = 0;
  def("__pabGuardTyped", (t, list) => { if (t === token && Array.isArray(list)) typed = list.filter((x) => Array.isArray(x) && x.length === 2).slice(0, 1000); return typed.length; });
  def("__pabGuardTakeLeaks", () => { const n = leaked; leaked = 0; return n; });
  const canon = (s) => {
    s = String(s);
    for (let i = 0; i < 3; i++) { let d; try { d = decodeURIComponent(s.replace(/\+/g, " ")); } catch (e) { break; } if (d === s) break; s = d; }
    return s.normalize("NFKC").toLowerCase().replace(/\s+/g, " ");
  };
  const carries = (u) => {
    if (!typed.length || u === undefined || u === null) return false;
    let cps;
    try { cps = Array.from(canon(u)).slice(0, 8192).map((c) => c.codePointAt(0)); } catch (e) { return false; }
    for (const [len, hash] of typed) {
      for (let i = 0; i + len <= cps.length; i++) {
        let h = 0x811c9dc5;
        for (let j = i; j < i + len; j++) { h ^= cps[j]; h = Math.imul(h, 16777619); }
        if ((h >>> 0) === hash) return true;
      }
    }
    return false;
  };
  const leaks = (u) => { if (!armed && carries(u)) { leaked++; return true; } return false; };
  for (const [C, attr] of [[window.HTMLImageElement, "src"], [window.HTMLScriptElement, "src"], [window.HTMLIFrameElement, "src"], [window.HTMLSourceElement, "src"], [window.HTMLLinkElement, "href"], [window.HTMLEmbedElement, "src"], [window.HTMLMediaElement, "src"]]) {
    const d = C && Object.getOwnPropertyDescriptor(C.prototype, attr);
    if (!d || !d.set) continue;
    Object.defineProperty(C.prototype, attr, { configurable: true, enumerable: d.enumerable, get() { return d.get.call(this); }, set(v) { if (leaks(v)) return; d.set.call(this, v); } });
  }
  const setAttr = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (n, v) { if (/^(src|href|srcset|action|data|poster|background)$/i.test(String(n)) && leaks(v)) return; return setAttr.apply(this, arguments); };
  const open1 = window.open;
  if (open1) window.open = function (u) { if (leaks(u)) return null; return open1.apply(this, arguments); };
  const F = HTMLFormElement.prototype;
  const submit = F.submit, requestSubmit = F.requestSubmit, getAttr = Element.prototype.getAttribute;
  // a GET (or dialog) form only navigates; a POST one sends the application
  const posts = (form, by) => {
    const m = (by && by.hasAttribute && by.hasAttribute("formmethod")) ? getAttr.call(by, "formmethod") : getAttr.call(form, "method");
    return String(m || "get").toLowerCase() === "post";
  };
  F.submit = function () { if (!armed && posts(this)) throw refuse("form.submit()"); return submit.apply(this, arguments); };
  F.requestSubmit = function (by) { if (!armed && posts(this, by)) throw refuse("form.requestSubmit()"); return requestSubmit.apply(this, arguments); };
  window.addEventListener("submit", (ev) => { if (!armed && ev.target instanceof HTMLFormElement && posts(ev.target, ev.submitter)) { ev.preventDefault(); ev.stopImmediatePropagation(); blocked++; } }, true);
  const safe = (m) => { m = String(m || "GET").toUpperCase(); return m === "GET" || m === "HEAD"; };
  const fetch0 = window.fetch;
  if (fetch0) window.fetch = function (input, init) {
    const m = (init && init.method) || (input && typeof input === "object" && input.method) || "GET";
    if (!armed && !safe(m)) return Promise.reject(refuse("fetch " + m));
    if (leaks(input && typeof input === "object" && input.url ? input.url : input)) return Promise.reject(new Error("pab guard: a request carrying typed data refused"));
    return fetch0.apply(this, arguments);
  };
  const X = XMLHttpRequest.prototype, open0 = X.open, send0 = X.send;
  X.open = function (m, u) { this.__pabMethod = m; this.__pabLeak = leaks(u); return open0.apply(this, arguments); };
  X.send = function () {
    if (!armed && !safe(this.__pabMethod)) throw refuse("XMLHttpRequest " + this.__pabMethod);
    if (this.__pabLeak) throw new Error("pab guard: a request carrying typed data refused");
    return send0.apply(this, arguments);
  };
  if (navigator.sendBeacon) { const b0 = navigator.sendBeacon.bind(navigator); navigator.sendBeacon = function () { if (!armed) { blocked++; return false; } return b0.apply(null, arguments); }; }
})();`

// Status is a snapshot of a run for the control API (JSON).
type Status struct {
	RunID           string        `json:"runId"`
	Mode            string        `json:"mode"`
	State           string        `json:"state"` // running | paused | done
	Pause           *PauseRequest `json:"pause,omitempty"`
	Actions         int           `json:"actions"`
	Pages           int           `json:"pages"`
	Filled          int           `json:"filled"`
	Uploaded        []string      `json:"uploaded"`
	SubmitAttempted bool          `json:"submitAttempted"`
	URL             string        `json:"url,omitempty"`    // the last page landed on
	Result          *Result       `json:"result,omitempty"` // set once the run is done
}

// probeElementJS runs in the page through the child's browser_evaluate with the target ref
// (never offered to the agent). It reports DOM facts about one control: whether activating it
// submits a form, the form's method and action, and an accessible-ish name.
const probeElementJS = `(el) => {
  const s = (v, n) => (typeof v === "string" ? v : "").replace(/\s+/g, " ").trim().slice(0, n || 200);
  const tag = (el.tagName || "").toLowerCase();
  const type = s(el.getAttribute && el.getAttribute("type"), 40).toLowerCase();
  const form = el.form || (el.closest ? el.closest("form") : null);
  let name = s(el.getAttribute("aria-label"));
  if (!name && el.getAttribute("aria-labelledby")) {
    name = s(el.getAttribute("aria-labelledby").split(/\s+/).map((id) => { const x = document.getElementById(id); return x ? x.innerText || x.textContent : ""; }).join(" "));
  }
  if (!name && el.labels && el.labels.length) name = s(Array.from(el.labels).map((l) => l.innerText || l.textContent).join(" "));
  if (!name && tag !== "input" && tag !== "select" && tag !== "textarea") name = s(el.innerText || el.textContent);
  if (!name && (type === "submit" || type === "button" || type === "reset")) name = s(el.value);
  if (!name) name = s(el.getAttribute("alt") || el.getAttribute("title") || el.getAttribute("placeholder"));
  const isButton = tag === "button";
  const btnType = isButton ? (el.type || "submit").toLowerCase() : "";
  let submits = false;
  if (form) {
    if (isButton && btnType === "submit") submits = true;
    if (tag === "input" && (type === "submit" || type === "image")) submits = true;
  }
  const textLike = (f) => f.tagName === "INPUT" && ["", "text", "search", "url", "tel", "email", "password", "date", "month", "week", "time", "datetime-local", "number"].includes((f.getAttribute("type") || "").toLowerCase());
  let enterSubmits = false;
  if (form && tag === "input" && textLike(el)) {
    const fields = Array.from(form.elements).filter(textLike);
    const hasSubmit = Array.from(form.elements).some((f) => (f.tagName === "BUTTON" && (f.type || "submit") === "submit") || (f.tagName === "INPUT" && ["submit", "image"].includes(f.type)));
    enterSubmits = hasSubmit || fields.length === 1;
  }
  let method = "";
  let formAction = "";
  if (form) {
    method = (submits && el.hasAttribute("formmethod") ? el.getAttribute("formmethod") : form.getAttribute("method") || "get").toLowerCase();
    if (method !== "post" && method !== "dialog") method = "get";
    formAction = s(submits && el.hasAttribute("formaction") ? el.formAction : form.action, 2000);
  }
  const handler = [el.getAttribute("onchange"), el.getAttribute("onclick"), el.getAttribute("oninput")].join(" ");
  // the question a choice answers: its fieldset's legend or its group's label
  let group = "";
  if (tag === "input" && (type === "radio" || type === "checkbox") || ["radio", "checkbox", "option", "switch"].includes(s(el.getAttribute("role"), 40))) {
    const fs = el.closest("fieldset");
    const lg = fs && fs.querySelector("legend");
    if (lg) group = s(lg.innerText || lg.textContent, 300);
    const g = !group && el.closest('[role=radiogroup], [role=group], [role=listbox]');
    if (g) {
      group = s(g.getAttribute("aria-label"), 300);
      if (!group && g.getAttribute("aria-labelledby")) group = s(g.getAttribute("aria-labelledby").split(/\s+/).map((id) => { const x = document.getElementById(id); return x ? x.innerText || x.textContent : ""; }).join(" "), 300);
    }
  }
  // where a GET form's submission would go, with the data it would carry
  let getURL = "";
  if (submits && method === "get") {
    try { const u = new URL(formAction || location.href); u.search = new URLSearchParams(new FormData(form, el)).toString(); getURL = u.href.slice(0, 8000); } catch (e) { getURL = ""; }
  }
  const options = tag === "select" ? Array.from(el.options).slice(0, 500).map((o) => ({ value: s(o.value, 300), label: s(o.label || o.text, 300) })) : [];
  return {
    group, options, getURL,
    tag, type, role: s(el.getAttribute("role"), 40), name, submits, enterSubmits, method, formAction,
    inForm: !!form, href: tag === "a" ? s(el.href, 2000) : "", newTab: tag === "a" && s(el.getAttribute("target"), 20) === "_blank",
    scriptSubmits: /submit\s*\(|requestSubmit/.test(handler), disabled: !!el.disabled,
    locked: typeof window.__pabGuardLock === "function",
  };
}`

// inspectPageJS reads the page's state: URL, title and the blockers the guard stops for.
const inspectPageJS = `() => {
  const text = (document.body ? document.body.innerText : "").slice(0, 30000).toLowerCase();
  const has = (sel) => { try { return !!document.querySelector(sel); } catch (e) { return false; } };
  // A captcha is a challenge a person can see: a rendered widget or challenge frame, on
  // screen. An invisible reCAPTCHA (its badge, size=invisible frames, a button carrying the
  // site key) or an invisible hCaptcha is not one: it never asks anything of the owner.
  const shown = (el) => {
    try {
      const st = getComputedStyle(el);
      if (st.display === "none" || st.visibility === "hidden" || Number(st.opacity) < 0.1) return false;
      const r = el.getBoundingClientRect();
      return r.width >= 20 && r.height >= 20 && r.right > 0 && r.bottom > 0;
    } catch (e) { return false; }
  };
  const invisibleKind = (el) => {
    const src = String(el.getAttribute("src") || "");
    if (/[?&#]size=invisible/i.test(src)) return true;
    if (el.closest('.grecaptcha-badge, [data-size="invisible" i]')) return true;
    const tag = el.tagName;
    return el.hasAttribute("data-sitekey") && (tag === "BUTTON" || tag === "INPUT" || tag === "A");
  };
  const challenge = () => {
    let els;
    try {
      els = document.querySelectorAll('iframe[src*="recaptcha"], iframe[title="reCAPTCHA" i], .g-recaptcha, iframe[src*="hcaptcha.com"], .h-captcha, iframe[src*="challenges.cloudflare.com"], .cf-turnstile, iframe[src*="arkoselabs"], .geetest_holder, [data-sitekey]');
    } catch (e) { return false; }
    for (const el of Array.from(els).slice(0, 200)) if (!invisibleKind(el) && shown(el)) return true;
    return false;
  };
  return {
    url: location.href,
    title: (document.title || "").slice(0, 200),
    scriptBlocked: typeof window.__pabGuardTake === "function" ? window.__pabGuardTake() : 0,
    leaked: typeof window.__pabGuardTakeLeaks === "function" ? window.__pabGuardTakeLeaks() : 0,
    captcha: challenge()
      || /i'?m not a robot|confirm (that )?you('?re| are) not a robot|verify (that )?you('?re| are) (a )?human|ich bin kein roboter|je ne suis pas un robot|no soy un robot|não sou um robô|non sono un robot|ik ben geen robot|ロボットではありません|我不是机器人|人机验证/.test(text),
    login: has('input[type=password]'),
    duplicate: /you('ve| have) already applied|already applied (for|to) this|application (already exists|has already been (submitted|received))|duplicate application|bereits beworben|déjà postulé|ya (te has|se ha) postulado|já se candidatou|già candidato|al gesolliciteerd|既に応募|すでに応募|已申请过|您已申请/.test(text),
    antiBot: /unusual traffic|access (is )?denied|request (has been )?blocked|bot detected|checking (if the site connection is secure|your browser)|are you a robot|zugriff verweigert|accès refusé|acceso denegado/.test(text),
    confirmed: /thank you for (your )?appl|application (has been |was )?(received|submitted)|we('ve| have) received your application|successfully (applied|submitted)|vielen dank für ihre bewerbung|bewerbung (wurde )?(erfolgreich )?(eingegangen|übermittelt|gesendet)|merci pour votre candidature|candidature (a bien été )?(envoyée|reçue)|gracias por (tu|su) (solicitud|postulación|candidatura)|obrigad[oa] pela (sua )?candidatura|grazie per (la tua|la sua) candidatura|bedankt voor je sollicitatie|応募(が|を)?(完了|受け付け)|ご応募ありがとうございます|申请已提交|感谢您的申请|提交成功/.test(text),
  };
}`

// MaxOutputBytes caps the text of every result the agent gets.
const MaxOutputBytes = 48 << 10

// maxAsksWithoutProgress bounds request_answer calls in a row with nothing filled, attached
// or opened between them; the next is refused (no_progress) without asking the owner.
const maxAsksWithoutProgress = 3

// consecutive browser failures after which the run fails.
const maxBrowserFailures = 3

var (
	fieldRoles  = []string{"checkbox", "radio", "option", "switch", "menuitemradio", "menuitemcheckbox"}
	typeRoles   = []string{"textbox", "searchbox", "combobox", "spinbutton"}
	selectRoles = []string{"combobox", "listbox"}
	navRoles    = []string{"link", "tab", "menuitem", "treeitem"}
	focusRoles  = []string{"textbox", "searchbox", "combobox", "spinbutton", "listbox"}
)

func in(list []string, s string) bool { return slices.Contains(list, s) }

// prop describes one argument the guard accepts for a tool.
type prop struct {
	name     string
	typ      string // string | number | boolean | strings (array of string)
	required bool
	maxLen   int      // strings: bound in bytes (0 = 2000)
	enum     []string // strings: allowed values
	desc     string
}

// toolSpec is what the guard accepts for one tool (the schema offered to the agent).
type toolSpec struct {
	name  string
	props []prop
}

const quoteDesc = "The exact words from the owner's profile, answers or materials that this answer comes from; the value must appear in them."

// browserSpecs are the browser tools offered, with the arguments the guard reads and
// forwards. "@ref" stands for the child's ref argument ("target" or "ref").
var browserSpecs = map[string][]prop{
	"browser_navigate":      {{name: "url", typ: "string", required: true, maxLen: 4096}},
	"browser_navigate_back": {},
	"browser_snapshot":      {},
	"browser_wait_for": {{name: "time", typ: "number"}, {name: "text", typ: "string", maxLen: 500},
		{name: "textGone", typ: "string", maxLen: 500}},
	"browser_click": {{name: "element", typ: "string", maxLen: 500}, {name: "@ref", typ: "string", required: true, maxLen: 40},
		{name: "source_quote", typ: "string", maxLen: 4000, desc: quoteDesc + " Needed for checkboxes, radios and options."}},
	"browser_type": {{name: "element", typ: "string", maxLen: 500}, {name: "@ref", typ: "string", required: true, maxLen: 40},
		{name: "text", typ: "string", required: true, maxLen: 10000}, {name: "submit", typ: "boolean"},
		{name: "source_quote", typ: "string", required: true, maxLen: 4000, desc: quoteDesc}},
	"browser_select_option": {{name: "element", typ: "string", maxLen: 500}, {name: "@ref", typ: "string", required: true, maxLen: 40},
		{name: "values", typ: "strings", required: true, maxLen: 1000},
		{name: "source_quote", typ: "string", required: true, maxLen: 4000, desc: quoteDesc}},
	"browser_press_key": {{name: "key", typ: "string", required: true, maxLen: 40}},
}

// browserOrder is the order tools are listed in.
var browserOrder = []string{"browser_navigate", "browser_navigate_back", "browser_snapshot", "browser_wait_for",
	"browser_click", "browser_type", "browser_select_option", "browser_press_key"}

var ownSpecs = map[string][]prop{
	"upload_artifact": {{name: "kind", typ: "string", required: true, enum: []string{"resume", "cover_letter"}}},
	"request_answer": {{name: "question", typ: "string", required: true, maxLen: 2000, desc: "The question for the owner; at most 300 characters are kept."},
		{name: "kind", typ: "string", enum: []string{"missing_answer", "screening_ambiguity"}}},
	"ready_for_review": {{name: "summary", typ: "string", required: true, maxLen: 20000}},
}

var ownDescriptions = map[string]string{
	"upload_artifact":  "Attach an approved document (resume or cover_letter). First click the field's upload control so a file chooser is open, then call this. Each document is attached at most once.",
	"request_answer":   "Ask the owner for an answer the sources do not give (kind missing_answer), or about an ambiguous question (kind screening_ambiguity). The run waits for them; an answer becomes one of your sources.",
	"ready_for_review": "The form is filled as far as the sources allow: stop here so the owner can review it. Call once, last.",
}

// block is what stopped the work and was not resolved.
type block struct {
	reason    string
	questions []string
}

// Bridge is the policy layer between an agent and its browser: every tool call is classed
// (read, fill, review, submit) and allowed or refused by code. Safe for concurrent use; calls
// are handled one at a time, and Status/Result/Done never wait for a call in progress.
type Bridge struct {
	cfg    Config
	app    *Application
	now    func() time.Time
	start  time.Time
	callMu sync.Mutex // serializes CallTool

	mu              sync.Mutex // guards everything below
	child           map[string]*mcp.Tool
	refArg          map[string]string
	actions         int
	pages           int
	filled          int
	uploaded        []string
	refs            refTracker
	admitted        map[string]bool
	extraSources    []string
	reviewReady     bool
	summary         string
	submitAttempted bool
	submitted       *Submitted
	blocked         *block
	stopped         bool
	stopNote        string
	failure         string
	browserFails    int
	pause           *PauseRequest
	lastURL         string
	repeat          RepeatGuard
	typed           []string        // values filled in this run (kept in memory only, never traced): a URL carrying one is a submit by GET
	asks            int             // request_answer calls in the run
	askStreak       int             // request_answer calls since the last progress
	askProgress     int             // filled + uploaded + pages at the last request_answer
	extraSites      map[string]bool // hosts the owner admitted for this run (PauseOutcome.AllowSite)
	sensitiveOK     map[string]bool // host+path of sensitive pages the owner confirmed
	engineStarted   bool
	engineEnded     bool
	snapOrigin      float64 // performance.timeOrigin of the document of the last form snapshot (formCheck); under mu
}

// NewBridge checks cfg (App, Browser and Pauser are required) and returns a Bridge. The
// run's clock (the minutes limit) starts here.
func NewBridge(cfg Config) (*Bridge, error) {
	if cfg.App == nil || cfg.Browser == nil || cfg.Pauser == nil {
		return nil, errors.New("guard: Config needs App, Browser and Pauser")
	}
	if cfg.App.Mode == "auto_submit" && cfg.App.Gate == "" {
		return nil, errors.New("guard: auto_submit needs a gate id")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	b := &Bridge{cfg: cfg, app: cfg.App, now: now, start: now(), admitted: map[string]bool{},
		extraSites: map[string]bool{}, sensitiveOK: map[string]bool{}}
	b.emit(Event{Type: "note", Detail: map[string]any{"mode": cfg.App.Mode, "status": "started"}})
	b.emitSources()
	return b, nil
}

func (b *Bridge) emit(e Event) {
	if e.At == "" {
		e.At = b.now().UTC().Format(time.RFC3339Nano)
	}
	b.cfg.Trace.Emit(e)
}

// loadChild fetches the child's tools once.
func (b *Bridge) loadChild(ctx context.Context) error {
	b.mu.Lock()
	loaded := b.child != nil
	b.mu.Unlock()
	if loaded {
		return nil
	}
	tools, err := b.cfg.Browser.ListTools(ctx)
	if err != nil {
		return err
	}
	child := map[string]*mcp.Tool{}
	refArg := map[string]string{}
	for _, t := range tools {
		if t == nil || t.Name == "" {
			continue
		}
		child[t.Name] = t
		props := schemaProps(t.InputSchema)
		switch {
		case props["target"] != nil:
			refArg[t.Name] = "target"
		case props["ref"] != nil:
			refArg[t.Name] = "ref"
		}
	}
	b.mu.Lock()
	b.child, b.refArg = child, refArg
	b.mu.Unlock()
	return nil
}

// schemaProps reads the "properties" of a JSON schema given as any JSON-marshalable value.
func schemaProps(schema any) map[string]any {
	m, ok := schema.(map[string]any)
	if !ok {
		raw, err := json.Marshal(schema)
		if err != nil {
			return nil
		}
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
	}
	p, _ := m["properties"].(map[string]any)
	return p
}

func (b *Bridge) refName(tool string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.refArg[tool]; r != "" {
		return r
	}
	return "target"
}

// specFor is the accepted arguments of a tool, with "@ref" resolved.
func (b *Bridge) specFor(name string) ([]prop, bool) {
	if ps, ok := ownSpecs[name]; ok {
		return ps, true
	}
	ps, ok := browserSpecs[name]
	if !ok {
		return nil, false
	}
	b.mu.Lock()
	_, offered := b.child[name]
	b.mu.Unlock()
	if !offered {
		return nil, false
	}
	out := slices.Clone(ps)
	for i := range out {
		if out[i].name == "@ref" {
			out[i].name = b.refName(name)
			out[i].desc = "The ref of the element in the latest browser_snapshot (like e12)."
		}
	}
	return out, true
}

func schemaOf(ps []prop, childProps map[string]any) map[string]any {
	props := map[string]any{}
	var req []string
	for _, p := range ps {
		var s map[string]any
		switch p.typ {
		case "strings":
			s = map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
		default:
			s = map[string]any{"type": p.typ}
		}
		if len(p.enum) > 0 {
			s["enum"] = p.enum
		}
		desc := p.desc
		if desc == "" {
			if c, ok := childProps[p.name].(map[string]any); ok {
				desc, _ = c["description"].(string)
			}
		}
		if desc != "" {
			s["description"] = desc
		}
		props[p.name] = s
		if p.required {
			req = append(req, p.name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(req) > 0 {
		out["required"] = req
	}
	return out
}

// ListTools returns the tools offered to the agent: the allowed browser tools the child has
// (with the guard's descriptions and schemas: only the arguments it accepts, source_quote
// added to answers) plus upload_artifact, request_answer and ready_for_review. Any other tool
// of the child is never listed. An error means the child's tools could not be read.
func (b *Bridge) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	if err := b.loadChild(ctx); err != nil {
		return nil, fmt.Errorf("guard: the browser's tools could not be read: %w", err)
	}
	var out []*mcp.Tool
	for _, name := range browserOrder {
		b.mu.Lock()
		ct := b.child[name]
		b.mu.Unlock()
		if ct == nil {
			continue
		}
		ps, _ := b.specFor(name)
		t := &mcp.Tool{Name: name, Description: ct.Description, InputSchema: schemaOf(ps, schemaProps(ct.InputSchema))}
		switch name {
		case "browser_navigate":
			t.Description = "Navigate the browser to an http(s) page of this application's sites: " + strings.Join(b.app.Sites, ", ") + "."
		case "browser_click":
			t.Description = "Click a link, tab, pagination or form-step button (Next, Upload, Add), or answer a checkbox, radio or option (answers need source_quote). A control that submits the application is governed by the run's mode (" + b.app.Mode + ")."
		case "browser_type":
			t.Description = "Type an answer into a text field. source_quote must be the owner's own words that contain the value."
		case "browser_select_option":
			t.Description = "Choose options in a dropdown. source_quote must be the owner's own words that contain each value."
		case "browser_press_key":
			t.Description = "Press Tab, Shift+Tab, an arrow key, Escape, Home, End, PageUp or PageDown. Nothing that types or submits."
		}
		out = append(out, t)
	}
	for _, name := range []string{"upload_artifact", "request_answer", "ready_for_review"} {
		out = append(out, &mcp.Tool{Name: name, Description: ownDescriptions[name], InputSchema: schemaOf(ownSpecs[name], nil)})
	}
	return out, nil
}

// validateArgs checks args against the accepted arguments: unknown names, wrong types,
// missing required ones and oversized strings are refused, naming the argument.
func validateArgs(tool string, ps []prop, args map[string]any) string {
	known := map[string]prop{}
	for _, p := range ps {
		known[p.name] = p
	}
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		p, ok := known[k]
		if !ok {
			acc := make([]string, 0, len(ps))
			for _, q := range ps {
				acc = append(acc, q.name)
			}
			list := "none"
			if len(acc) > 0 {
				list = strings.Join(acc, ", ")
			}
			return fmt.Sprintf("%s does not take the argument %q (it takes: %s).", tool, bound(k, 60), list)
		}
		v := args[k]
		limit := p.maxLen
		if limit == 0 {
			limit = 2000
		}
		switch p.typ {
		case "string":
			s, ok := v.(string)
			if !ok {
				return fmt.Sprintf("%s: argument %q must be a string.", tool, k)
			}
			if len(s) > limit {
				return fmt.Sprintf("%s: argument %q is longer than %d bytes.", tool, k, limit)
			}
			if len(p.enum) > 0 && !slices.Contains(p.enum, s) {
				return fmt.Sprintf("%s: argument %q must be one of %s.", tool, k, strings.Join(p.enum, ", "))
			}
		case "number":
			f, ok := v.(float64)
			if i, isInt := v.(int); isInt {
				f, ok = float64(i), true
			}
			if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Sprintf("%s: argument %q must be a number.", tool, k)
			}
		case "boolean":
			if _, ok := v.(bool); !ok {
				return fmt.Sprintf("%s: argument %q must be true or false.", tool, k)
			}
		case "strings":
			list, ok := v.([]any)
			if !ok {
				if ss, isStrs := v.([]string); isStrs {
					list = make([]any, len(ss))
					for i := range ss {
						list[i] = ss[i]
					}
					ok = true
				}
			}
			if !ok || len(list) > 50 {
				return fmt.Sprintf("%s: argument %q must be a list of at most 50 strings.", tool, k)
			}
			for _, x := range list {
				s, isStr := x.(string)
				if !isStr {
					return fmt.Sprintf("%s: argument %q must be a list of strings.", tool, k)
				}
				if len(s) > limit {
					return fmt.Sprintf("%s: an item of %q is longer than %d bytes.", tool, k, limit)
				}
			}
		}
	}
	for _, p := range ps {
		if _, ok := args[p.name]; p.required && !ok {
			return fmt.Sprintf("%s: argument %q is required.", tool, p.name)
		}
	}
	return ""
}

func argStr(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}

func argStrings(args map[string]any, k string) []string {
	switch v := args[k].(type) {
	case []string:
		return v
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// textResult is a tool result with one text, capped at MaxOutputBytes.
func textResult(s string, isErr bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: capText(s)}}, IsError: isErr}
}

// capText bounds s to MaxOutputBytes, saying so when it cut.
func capText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxOutputBytes {
		return s
	}
	note := fmt.Sprintf("\n[output truncated: %d of %d bytes shown]", MaxOutputBytes-100, len(s))
	return bound(s, MaxOutputBytes-100) + note
}

// textOf joins the text contents of a result; other content kinds are noted, not passed.
func textOf(r *mcp.CallToolResult) string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, c := range r.Content {
		switch x := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, x.Text)
		default:
			parts = append(parts, "[non-text content omitted]")
		}
	}
	return strings.Join(parts, "\n")
}

// refuse traces a refused decision and returns the refusal.
func (b *Bridge) refuse(tool, class, code, msg, domain string) *mcp.CallToolResult {
	b.emit(Event{Type: "policy.decision", Domain: domain, Detail: map[string]any{"tool": tool, "class": class, "decision": "refused", "reason": code}})
	return textResult(msg, true)
}

func (b *Bridge) allow(tool, class, basis string) {
	d := map[string]any{"tool": tool, "class": class, "decision": "allowed"}
	if basis != "" {
		d["basis"] = basis
	}
	b.emit(Event{Type: "policy.decision", Detail: d})
}

// callBrowser forwards one call to the child. A transport error or a garbage answer (nil) is
// returned as a refusal message with ok false, and traced.
func (b *Bridge) callBrowser(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, string, bool) {
	res, err := b.cfg.Browser.CallTool(ctx, tool, args)
	if err != nil || res == nil {
		b.mu.Lock()
		b.browserFails++
		fails := b.browserFails
		if fails >= maxBrowserFailures && b.failure == "" {
			b.failure = "the browser MCP server failed " + strconv.Itoa(fails) + " times in a row"
			b.stopped = true
		}
		b.mu.Unlock()
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "decision": "failed", "reason": "browser_error", "count": fails}})
		why := "no answer"
		if err != nil {
			why = bound(err.Error(), 300)
		}
		return nil, "The browser did not answer properly (" + why + "); nothing was done and nothing was submitted. Take a browser_snapshot to see the page.", false
	}
	b.mu.Lock()
	b.browserFails = 0
	b.mu.Unlock()
	return res, "", true
}

// passOn returns a child's result to the agent (capped), and learns any snapshot in it.
func (b *Bridge) passOn(res *mcp.CallToolResult) *mcp.CallToolResult {
	t := textOf(res)
	b.learnSnapshot(t)
	return textResult(t, res.IsError)
}

func (b *Bridge) learnSnapshot(t string) bool {
	if !strings.Contains(t, "[ref=") {
		return false
	}
	snap, ok := ParseSnapshot(t)
	if !ok {
		return false
	}
	b.mu.Lock()
	b.refs.update(snap)
	b.mu.Unlock()
	return true
}

// pageState is what inspectPageJS reports.
type pageState struct {
	URL, Title                                    string
	Captcha, Login, Duplicate, AntiBot, Confirmed bool
}

// evaluateResult reads the JSON value of a browser_evaluate answer ("### Result\n<json>\n###
// ..." from @playwright/mcp, or bare JSON).
func evaluateResult(t string) (map[string]any, bool) {
	if len(t) > 1<<20 {
		return nil, false
	}
	body := t
	if i := strings.Index(t, "### Result"); i >= 0 {
		body = t[i+len("### Result"):]
		if j := strings.Index(body, "\n### "); j >= 0 {
			body = body[:j]
		}
	}
	body = strings.TrimSpace(body)
	body = strings.TrimPrefix(body, "```json")
	body = strings.TrimPrefix(body, "```")
	body = strings.TrimSuffix(body, "```")
	var v map[string]any
	if json.Unmarshal([]byte(strings.TrimSpace(body)), &v) != nil {
		// Some versions return the value as a JSON string holding JSON.
		var s string
		if json.Unmarshal([]byte(strings.TrimSpace(body)), &s) != nil || json.Unmarshal([]byte(s), &v) != nil {
			return nil, false
		}
	}
	return v, v != nil
}

func (b *Bridge) inspect(ctx context.Context) *pageState {
	b.mu.Lock()
	_, has := b.child["browser_evaluate"]
	b.mu.Unlock()
	if !has {
		return nil
	}
	res, err := b.cfg.Browser.CallTool(ctx, "browser_evaluate", map[string]any{"function": inspectPageJS})
	if err != nil || res == nil || res.IsError {
		return nil
	}
	v, ok := evaluateResult(textOf(res))
	if !ok {
		return nil
	}
	u, ok := v["url"].(string)
	if !ok {
		return nil
	}
	t := func(k string) bool { x, _ := v[k].(bool); return x }
	title, _ := v["title"].(string)
	if n, _ := v["leaked"].(float64); n > 0 {
		b.emit(Event{Type: "policy.decision", Domain: hostOf(u), Detail: map[string]any{"class": ClassSubmit, "decision": "refused", "reason": "submit.by_get", "basis": "page_request", "count": int(math.Min(n, 1e6))}})
	}
	if n, _ := v["scriptBlocked"].(float64); n > 0 {
		b.emit(Event{Type: "policy.decision", Domain: hostOf(u), Detail: map[string]any{"class": ClassSubmit, "decision": "refused", "reason": "script_submit", "count": int(math.Min(n, 1e6))}})
	}
	return &pageState{URL: u, Title: title, Captcha: t("captcha"), Login: t("login"), Duplicate: t("duplicate"), AntiBot: t("antiBot"), Confirmed: t("confirmed")}
}

// facts is what probeElementJS reports.
type facts struct {
	Tag, Type, Role, Name, Method, FormAction, Href   string
	Submits, EnterSubmits, InForm, NewTab, ScriptSubs bool
	Group                                             string      // the question a radio or checkbox answers (legend, group label)
	Options                                           []selectOpt // a <select>'s options
	GetURL                                            string      // a GET form's submission URL with its data (for a control that submits one)
	Unlocked                                          bool        // the page runs no submit lock (it was open before the guard installed it)
}

// selectOpt is one option of a <select>: its value attribute and its visible label.
type selectOpt struct{ Value, Label string }

func (b *Bridge) probe(ctx context.Context, ref, label string) *facts {
	b.mu.Lock()
	_, has := b.child["browser_evaluate"]
	b.mu.Unlock()
	if !has {
		return nil
	}
	if label == "" {
		label = "control"
	}
	args := map[string]any{"function": probeElementJS, "element": bound(label, 200), b.refName("browser_evaluate"): ref}
	res, err := b.cfg.Browser.CallTool(ctx, "browser_evaluate", args)
	if err != nil || res == nil || res.IsError {
		return nil
	}
	v, ok := evaluateResult(textOf(res))
	if !ok {
		return nil
	}
	submits, ok := v["submits"].(bool)
	if !ok {
		return nil
	}
	s := func(k string) string { x, _ := v[k].(string); return x }
	t := func(k string) bool { x, _ := v[k].(bool); return x }
	var opts []selectOpt
	if list, ok := v["options"].([]any); ok {
		for _, o := range list {
			if m, ok := o.(map[string]any); ok {
				val, _ := m["value"].(string)
				lab, _ := m["label"].(string)
				opts = append(opts, selectOpt{Value: val, Label: lab})
			}
		}
	}
	return &facts{Tag: strings.ToLower(s("tag")), Type: strings.ToLower(s("type")), Role: s("role"), Name: s("name"),
		Method: strings.ToLower(s("method")), FormAction: s("formAction"), Href: s("href"), Submits: submits,
		EnterSubmits: t("enterSubmits"), InForm: t("inForm"), NewTab: t("newTab"), ScriptSubs: t("scriptSubmits"),
		Group: s("group"), Options: opts, GetURL: s("getURL"), Unlocked: v["locked"] == false}
}

func blockerOf(s *pageState) string {
	switch {
	case s.Captcha:
		return "captcha"
	case s.AntiBot:
		return "anti_bot"
	case s.Duplicate:
		return "duplicate_application"
	case s.Login:
		return "login_required"
	}
	return ""
}

func hostOf(raw string) string {
	_, h, refusal := checkURL(raw)
	if refusal != "" {
		return ""
	}
	return h
}

// pauseFor asks the owner and waits. true: resumed (and recheck, when given, passed).
// Not resumed: the run stops, blocked for p.Reason.
func (b *Bridge) pauseFor(ctx context.Context, p PauseRequest, recheck func() bool) bool {
	if _, ok := b.pauseOutcome(ctx, p); !ok {
		return false
	}
	if recheck != nil && !recheck() {
		b.mu.Lock()
		b.stopped = true
		b.stopNote = "The owner resumed but the page still needs a person (" + p.Reason + ")."
		b.mu.Unlock()
		return false
	}
	b.unblock()
	return true
}

// unblock clears the block a resumed pause left.
func (b *Bridge) unblock() {
	b.mu.Lock()
	b.blocked = nil
	b.mu.Unlock()
}

// pauseOutcome asks the owner and waits, as pauseFor without a recheck, and returns how the
// pause ended: resumed (with the owner's answer kept as a source, and the site they admit,
// PauseOutcome.AllowSite), or not (the run is then stopped, blocked for p.Reason).
func (b *Bridge) pauseOutcome(ctx context.Context, p PauseRequest) (PauseOutcome, bool) {
	p.Question = boundChars(p.Question, capQuestionChar)
	reason := p.Reason
	traceReason := reason
	if reason == "sensitive_page" {
		traceReason = "consent_required" // the owner's call; "sensitive_page" is in the detail
	}
	b.mu.Lock()
	q := []string{}
	if p.Question != "" {
		q = append(q, p.Question)
	}
	b.blocked = &block{reason: traceReason, questions: q}
	pp := p
	b.pause = &pp
	b.mu.Unlock()
	b.emit(Event{Type: "run.paused", URL: p.URL, Domain: p.Domain, PauseReason: traceReason, Detail: map[string]any{"reason": reason}})
	out := b.cfg.Pauser.Pause(ctx, p)
	b.mu.Lock()
	b.pause = nil
	b.mu.Unlock()
	if !out.Resumed {
		b.emit(Event{Type: "run.resumed", Detail: map[string]any{"status": "cancelled", "reason": reason}})
		b.mu.Lock()
		b.stopped = true
		b.stopNote = "The owner cancelled the run at a pause (" + reason + ")."
		b.mu.Unlock()
		return out, false
	}
	b.emit(Event{Type: "run.resumed", Detail: map[string]any{"status": "resumed", "reason": reason}})
	if a := strings.TrimSpace(out.Answer); a != "" {
		b.mu.Lock()
		kept := len(b.extraSources)+len(b.app.Grounding.Answers) < capAnswers
		if kept {
			b.extraSources = append(b.extraSources, boundChars(a, capAnswerChars))
		}
		b.mu.Unlock()
		if kept {
			b.emit(Event{Type: "source.read", Detail: map[string]any{"kind": "owner_answer", "bytes": len(a)}})
		} else {
			b.emit(Event{Type: "note", Detail: map[string]any{"kind": "owner_answer", "status": "not_kept", "count": capAnswers}})
		}
	}
	return out, true
}

// sources are the grounding sources of the run: the application's, then the owner's
// answers given at pauses.
func (b *Bridge) sources() []GroundingSource {
	b.mu.Lock()
	defer b.mu.Unlock()
	src := b.app.GroundingSources()
	for _, a := range b.extraSources {
		src = append(src, GroundingSource{Kind: SourceOwnerAnswer, Text: a})
	}
	return src
}

// Done reports whether the run is over (review ready, submit attempted, stopped by a guard,
// a limit, a browser failure or a cancel).
func (b *Bridge) Done() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.doneLocked()
}

func (b *Bridge) doneLocked() bool { return b.reviewReady || b.submitAttempted || b.stopped }

// Cancel ends the run: it is blocked (the reason of a pending pause, else incomplete) and
// later calls are refused. note (bounded) goes into the result's summary.
func (b *Bridge) Cancel(note string) {
	b.mu.Lock()
	already := b.doneLocked()
	if !already {
		b.stopped = true
		b.stopNote = bound(strings.TrimSpace(note), 500)
		if b.stopNote == "" {
			b.stopNote = "The run was cancelled."
		}
	}
	b.mu.Unlock()
	if !already {
		b.emit(Event{Type: "note", Detail: map[string]any{"status": "cancelled"}})
	}
}

// Result is the result envelope of the run so far; it always passes ValidateResult.
func (b *Bridge) Result() Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := Result{RunID: b.app.ID, Mode: b.app.Mode, TraceID: b.cfg.Trace.ID(), EngineAuth: "unknown",
		Filled: b.filled, Uploaded: slices.Clone(b.uploaded), SubmitAttempted: b.submitAttempted,
		Summary: boundChars(b.summary, capSummary)}
	if r.TraceID == "" {
		r.TraceID = "trace-" + b.app.ID
	}
	if r.Uploaded == nil {
		r.Uploaded = []string{}
	}
	switch {
	case b.submitted != nil:
		r.Outcome = "submitted"
		s := *b.submitted
		r.Submitted = &s
	case b.submitAttempted:
		r.Outcome, r.BlockReason = "blocked", "submit_unconfirmed"
		r.Questions = []string{"The application was submitted but the site did not confirm it. Check the employer's site or your email before anything is retried."}
	case b.reviewReady:
		r.Outcome = "awaiting_review"
	case b.failure != "":
		r.Outcome, r.Error = "failed", b.failure
	case b.blocked != nil:
		r.Outcome, r.BlockReason, r.Questions = "blocked", b.blocked.reason, slices.Clone(b.blocked.questions)
	default:
		r.Outcome, r.BlockReason = "blocked", "incomplete"
	}
	if r.Summary == "" && b.stopNote != "" {
		r.Summary = b.stopNote
	}
	if len(r.Questions) > capQuestions {
		r.Questions = r.Questions[:capQuestions]
	}
	return r
}

// Status is a snapshot for the control API.
func (b *Bridge) Status() Status {
	b.mu.Lock()
	st := Status{RunID: b.app.ID, Mode: b.app.Mode, State: "running", Actions: b.actions, Pages: b.pages,
		Filled: b.filled, Uploaded: slices.Clone(b.uploaded), SubmitAttempted: b.submitAttempted, URL: b.lastURL}
	if st.Uploaded == nil {
		st.Uploaded = []string{}
	}
	if b.pause != nil {
		p := *b.pause
		st.State, st.Pause = "paused", &p
	}
	done := b.doneLocked()
	b.mu.Unlock()
	if done {
		r := b.Result()
		st.State, st.Result = "done", &r
	}
	return st
}

// CallTool classes one call and allows or refuses it. It never returns a Go error for a policy
// decision: refusals are results with IsError (a fill_and_review submit and a nudge are
// plain results). args may be nil. Calls run one at a time; a pause blocks until the Pauser
// returns.
func (b *Bridge) CallTool(ctx context.Context, name string, args map[string]any) *mcp.CallToolResult {
	b.callMu.Lock()
	defer b.callMu.Unlock()
	if args == nil {
		args = map[string]any{}
	}
	if b.Done() {
		return b.refuse(bound(name, 60), ClassRead, "run_over", "The application is finished for this run. Stop now.", "")
	}
	if err := b.loadChild(ctx); err != nil {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": bound(name, 60), "decision": "failed", "reason": "browser_error"}})
		return textResult("The browser's tools could not be read ("+bound(err.Error(), 300)+"); nothing was done.", true)
	}
	ps, ok := b.specFor(name)
	if !ok {
		return b.refuse(bound(name, 60), ClassRead, "tool_not_allowed", bound(name, 60)+" is not available to an application run. The tools you have are listed by the server.", "")
	}
	if msg := validateArgs(name, ps, args); msg != "" {
		return b.refuse(name, ClassRead, "bad_arguments", msg, "")
	}
	b.mu.Lock()
	verdict, count := b.repeat.Observe(name, args)
	b.mu.Unlock()
	switch verdict {
	case RepeatStop:
		b.mu.Lock()
		b.stopped = true
		b.stopNote = "Stopped: the agent repeated the same call " + strconv.Itoa(count) + " times in a row."
		if b.blocked == nil {
			b.blocked = &block{reason: "incomplete", questions: []string{"The agent kept repeating " + name + "; the form may need a person."}}
		}
		b.mu.Unlock()
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": name, "decision": "refused", "reason": "repeat_stop", "count": count}})
		return textResult("You repeated the same "+name+" call "+strconv.Itoa(count)+" times; the run is stopped. Stop now.", true)
	case RepeatNudge:
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": name, "decision": "refused", "reason": "repeat_nudge", "count": count}})
		return textResult("You repeated the same "+name+" call "+strconv.Itoa(count)+" times in a row, so it was not run again. If the form is filled, call ready_for_review; otherwise change approach (take a browser_snapshot, or call request_answer).", true)
	}
	switch name {
	case "ready_for_review":
		return b.review(argStr(args, "summary"))
	case "request_answer":
		return b.requestAnswer(ctx, args)
	}
	if b.now().Sub(b.start) > time.Duration(b.app.Limits.Minutes)*time.Minute {
		b.stopLimit("minutes")
		return b.refuse(name, ClassRead, "limit_minutes", "The run's time limit of "+strconv.Itoa(b.app.Limits.Minutes)+" minutes is reached. Call ready_for_review now.", "")
	}
	b.mu.Lock()
	b.actions++
	over := b.actions > b.app.Limits.Actions
	b.mu.Unlock()
	if over {
		return b.refuse(name, ClassRead, "limit_actions", "The run's limit of "+strconv.Itoa(b.app.Limits.Actions)+" browser actions is reached. Call ready_for_review now.", "")
	}
	switch name {
	case "browser_navigate":
		return b.navigate(ctx, argStr(args, "url"))
	case "browser_navigate_back":
		return b.back(ctx)
	case "browser_snapshot":
		return b.snapshot(ctx)
	case "browser_wait_for":
		return b.waitFor(ctx, args)
	case "browser_click":
		return b.click(ctx, args)
	case "browser_type":
		return b.typeText(ctx, args)
	case "browser_select_option":
		return b.selectOption(ctx, args)
	case "browser_press_key":
		return b.pressKey(ctx, argStr(args, "key"))
	case "upload_artifact":
		return b.upload(ctx, argStr(args, "kind"))
	}
	return b.refuse(name, ClassRead, "tool_not_allowed", name+" is not available to an application run.", "")
}

func (b *Bridge) stopLimit(which string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.blocked == nil {
		b.blocked = &block{reason: "incomplete", questions: []string{}}
	}
	b.stopNote = "The run's " + which + " limit was reached."
}

func (b *Bridge) pageLimitReached() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pages >= b.app.Limits.Pages
}

func (b *Bridge) navigate(ctx context.Context, raw string) *mcp.CallToolResult {
	u, host, refusal := checkURL(raw)
	if refusal != "" {
		return b.refuse("browser_navigate", ClassRead, "bad_url", refusal, "")
	}
	if b.pageLimitReached() {
		return b.refuse("browser_navigate", ClassRead, "limit_pages", "The run's limit of "+strconv.Itoa(b.app.Limits.Pages)+" pages is reached. Call ready_for_review now.", "")
	}
	if !b.allowsHost(host) {
		return b.refuse("browser_navigate", ClassRead, "external_site", host+" is not one of this application's sites ("+strings.Join(b.app.Sites, ", ")+").", host)
	}
	if b.carriesTyped(u.String()) {
		return b.refuseByGet("browser_navigate", host)
	}
	ok, sensitive := b.pathAllowed(host, u.EscapedPath())
	if !ok && !b.isStartURL(u) {
		return b.refuse("browser_navigate", ClassRead, "path_not_listed", "That page is not in the reviewed site manifest of this application"+b.listedPaths()+".", host)
	}
	if sensitive && !b.confirmSensitive(ctx, "browser_navigate", u, host) {
		return textResult("That page is marked sensitive and the owner did not let the run open it. Stop now.", true)
	}
	b.admit(host)
	res, msg, ok := b.callBrowser(ctx, "browser_navigate", map[string]any{"url": u.String()})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	return b.afterMove(ctx, "browser_navigate", res)
}

// isStartURL reports whether u is the application's start_url (scheme, host and path; the
// query and fragment aside): the run's own start page is never off the manifest.
func (b *Bridge) isStartURL(u *url.URL) bool {
	if b.app.StartURL == "" || u == nil {
		return false
	}
	s, err := url.Parse(b.app.StartURL)
	if err != nil {
		return false
	}
	return strings.EqualFold(s.Scheme, u.Scheme) && strings.EqualFold(s.Host, u.Host) && s.EscapedPath() == u.EscapedPath()
}

// carriesTyped reports whether raw (a URL) carries a value filled in this run: after
// percent- and plus-decoding and Normalize, a value of 4 or more characters anywhere in it,
// a shorter one as a whole query value or path segment.
func (b *Bridge) carriesTyped(raw string) bool {
	b.mu.Lock()
	typed := slices.Clone(b.typed)
	b.mu.Unlock()
	if len(typed) == 0 || raw == "" {
		return false
	}
	dec := strings.ReplaceAll(raw, "+", " ")
	for i := 0; i < 3; i++ { // doubly encoded data too
		d, err := url.PathUnescape(dec)
		if err != nil || d == dec {
			break
		}
		dec = d
	}
	n := Normalize(dec)
	var parts []string
	if u, err := url.Parse(raw); err == nil {
		for _, seg := range strings.Split(u.Path, "/") {
			parts = append(parts, Normalize(seg))
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				parts = append(parts, Normalize(v))
			}
		}
	}
	for _, t := range typed {
		nt := Normalize(t)
		if nt == "" {
			continue
		}
		if len([]rune(nt)) >= 4 && strings.Contains(n, nt) {
			return true
		}
		if slices.Contains(parts, nt) {
			return true
		}
	}
	return false
}

// canonTyped is the form both the guard and the submit lock hash a typed value in: NFKC,
// lower case, runs of white space one space.
func canonTyped(v string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(norm.NFKC.String(v)), unicode.IsSpace), " ")
}

// typedHashes are the [length, hash] pairs of the run's typed values (and extra) of four or
// more characters for the submit lock: FNV-1a (32 bits) over the code points of canonTyped.
func (b *Bridge) typedHashes(extra string) [][2]uint32 {
	b.mu.Lock()
	vals := append(slices.Clone(b.typed), extra)
	b.mu.Unlock()
	var out [][2]uint32
	seen := map[[2]uint32]bool{}
	for _, v := range vals {
		rs := []rune(canonTyped(v))
		if len(rs) < 4 {
			continue
		}
		h := uint32(0x811c9dc5)
		for _, r := range rs {
			h ^= uint32(r)
			h *= 16777619
		}
		k := [2]uint32{uint32(len(rs)), h}
		if !seen[k] && len(out) < 1000 {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// pushTyped gives the page's submit lock the hashes of the typed values (with extra, a value
// about to be typed), so that the page's own GETs carrying one are refused. Only with the
// lock installed (LockToken) and browser_evaluate available.
func (b *Bridge) pushTyped(ctx context.Context, extra string) {
	b.mu.Lock()
	_, has := b.child["browser_evaluate"]
	b.mu.Unlock()
	if b.cfg.LockToken == "" || !has {
		return
	}
	hs := b.typedHashes(extra)
	if len(hs) == 0 {
		return
	}
	list, _ := json.Marshal(hs)
	fn := "() => typeof window.__pabGuardTyped === \"function\" && window.__pabGuardTyped(\"" + b.cfg.LockToken + "\", " + string(list) + ")"
	_, _ = b.cfg.Browser.CallTool(ctx, "browser_evaluate", map[string]any{"function": fn})
}

// refuseByGet refuses a navigation that would carry typed data to a site (class submit,
// reason submit.by_get): under either mode only the gated submit may send the application.
func (b *Bridge) refuseByGet(tool, host string) *mcp.CallToolResult {
	return b.refuse(tool, ClassSubmit, "submit.by_get", "That URL carries values typed into the form: opening it would send the application by GET. It was not opened. Stop sending form data; call ready_for_review when the form is filled.", host)
}

func (b *Bridge) admit(host string) {
	b.mu.Lock()
	first := !b.admitted[host]
	b.admitted[host] = true
	b.mu.Unlock()
	if first {
		b.emit(Event{Type: "policy.decision", Domain: host, Detail: map[string]any{"class": ClassRead, "decision": "allowed", "basis": "allow_list"}})
	}
}

func (b *Bridge) back(ctx context.Context) *mcp.CallToolResult {
	res, msg, ok := b.callBrowser(ctx, "browser_navigate_back", map[string]any{})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	return b.afterMove(ctx, "browser_navigate_back", res)
}

func (b *Bridge) snapshot(ctx context.Context) *mcp.CallToolResult {
	res, msg, ok := b.callBrowser(ctx, "browser_snapshot", map[string]any{})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	t := textOf(res)
	if snap, ok := ParseSnapshot(t); ok && snap.PageURL != "" {
		// The page may have moved by itself (a timed redirect): re-check where it is.
		b.mu.Lock()
		last := b.lastURL
		b.mu.Unlock()
		if snap.PageURL != last && snap.PageURL != "about:blank" {
			_, host, refusal := checkURL(snap.PageURL)
			if refusal != "" || !b.allowsHost(host) {
				return b.afterMove(ctx, "browser_snapshot", res)
			}
		}
	}
	return b.passOn(res)
}

func (b *Bridge) waitFor(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	fwd := map[string]any{}
	for _, k := range []string{"text", "textGone"} {
		if v, ok := args[k].(string); ok {
			fwd[k] = v
		}
	}
	if v, ok := args["time"].(float64); ok {
		fwd["time"] = math.Max(0, math.Min(v, 30))
	}
	res, msg, ok := b.callBrowser(ctx, "browser_wait_for", fwd)
	if !ok {
		return textResult(msg, true)
	}
	return b.afterClick(ctx, "browser_wait_for", res)
}

// afterMove handles a page change: the landed URL is checked (scheme, site, manifest path);
// leaving is undone (navigate back) and paused or refused; else landed().
func (b *Bridge) afterMove(ctx context.Context, tool string, res *mcp.CallToolResult) *mcp.CallToolResult {
	b.mu.Lock()
	b.refs.invalidate()
	b.mu.Unlock()
	state := b.inspect(ctx)
	if state == nil {
		return b.refuse(tool, ClassRead, "inspect_failed", "The page could not be inspected after it changed, so it cannot be shown to be safe. Take a browser_snapshot.", "")
	}
	if state.URL == "about:blank" {
		// the start of the browser's history (back past the first page): no site, nothing
		// to undo, no redirect
		b.mu.Lock()
		b.lastURL = state.URL
		b.mu.Unlock()
		b.allow(tool, ClassRead, "about_blank")
		return textResult(textOf(res)+"\n(The browser is at about:blank, the start of its history. Navigate to a page of this application's sites.)", res.IsError)
	}
	u, host, refusal := checkURL(state.URL)
	if refusal != "" || !b.allowsHost(host) {
		b.undo(ctx)
		shown := host
		if shown == "" {
			shown = "a non-web page"
		}
		b.emit(Event{Type: "browser.blocked", URL: state.URL, Domain: host, Detail: map[string]any{"reason": "external_redirect", "tool": tool}})
		q := "The page led to " + shown + ", outside this application's sites. It was undone."
		if refusal == "" && host != "" {
			q += " Resume with {\"allow_site\": \"" + host + "\"} to admit it for this run."
		}
		out, resumed := b.pauseOutcome(ctx, PauseRequest{Reason: "external_redirect", Question: q, URL: traceURL(state.URL), Domain: host})
		if !resumed {
			return b.refuse(tool, ClassRead, "external_redirect", "That led to "+shown+", which is not one of this application's sites. It was undone. Stop now.", host)
		}
		b.unblock()
		if refusal == "" && host != "" && out.AllowSite == host {
			// the owner admitted the site for the run: open the page again, checked anew
			b.mu.Lock()
			b.extraSites[host] = true
			b.mu.Unlock()
			b.emit(Event{Type: "policy.decision", URL: traceURL(state.URL), Domain: host, Detail: map[string]any{"tool": tool, "class": ClassRead, "decision": "allowed", "basis": "owner_allowed_site"}})
			if b.carriesTyped(state.URL) {
				// the owner saw the URL without its query: admitting the site is not
				// admitting the typed values it would carry there
				return b.refuseByGet(tool, host)
			}
			res2, msg, ok := b.callBrowser(ctx, "browser_navigate", map[string]any{"url": state.URL})
			if !ok {
				return textResult(msg, true)
			}
			if res2.IsError {
				return b.passOn(res2)
			}
			return b.afterMove(ctx, tool, res2)
		}
		return b.refuse(tool, ClassRead, "external_redirect", "That led to "+shown+", which is not one of this application's sites; it was undone and the owner was told. Take a browser_snapshot and continue on the application's pages.", host)
	}
	if b.carriesTyped(state.URL) {
		// the page (or a script) already sent it: undo, and trace it as the submit it was
		b.undo(ctx)
		b.emit(Event{Type: "browser.blocked", URL: state.URL, Domain: host, Detail: map[string]any{"reason": "submit.by_get", "tool": tool}})
		return b.refuseByGet(tool, host)
	}
	if ok, _ := b.pathAllowed(host, u.EscapedPath()); !ok && !b.isStartURL(u) {
		b.undo(ctx)
		return b.refuse(tool, ClassRead, "path_not_listed", "That page is not in the reviewed site manifest of this application"+b.listedPaths()+"; it was undone. Take a browser_snapshot.", host)
	}
	return b.landed(ctx, tool, res, state)
}

// undo goes back after leaving the allowed pages.
func (b *Bridge) undo(ctx context.Context) {
	_, _, _ = b.callBrowser(ctx, "browser_navigate_back", map[string]any{})
	b.mu.Lock()
	b.refs.invalidate()
	b.mu.Unlock()
	b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": "browser_navigate_back", "class": ClassRead, "decision": "allowed", "basis": "undo"}})
}

// landed counts and traces a page landed on, and pauses for a blocker or a sensitive page.
func (b *Bridge) landed(ctx context.Context, tool string, res *mcp.CallToolResult, state *pageState) *mcp.CallToolResult {
	u, host, _ := checkURL(state.URL)
	b.mu.Lock()
	b.pages++
	b.lastURL = state.URL
	b.mu.Unlock()
	b.admit(host)
	b.emit(Event{Type: "browser.navigated", URL: state.URL, Domain: host, Detail: map[string]any{"tool": tool}})
	b.pushTyped(ctx, "") // a new page's lock starts empty
	if blocker := blockerOf(state); blocker != "" {
		b.emit(Event{Type: "browser.blocked", URL: state.URL, Domain: host, Detail: map[string]any{"reason": blocker}})
		ok := b.pauseFor(ctx, PauseRequest{Reason: blocker, Question: "The page needs a person: " + strings.ReplaceAll(blocker, "_", " ") + ".", URL: traceURL(state.URL), Domain: host}, func() bool {
			after := b.inspect(ctx)
			return after != nil && blockerOf(after) == ""
		})
		if !ok {
			return textResult(host+" needs a person ("+strings.ReplaceAll(blocker, "_", " ")+") and it was not resolved. Do not work around it. Stop now.", true)
		}
		return textResult("Resumed after the owner handled it. Take a browser_snapshot to read the page.", false)
	}
	b.mu.Lock()
	confirmed := b.sensitiveOK[host+u.EscapedPath()]
	b.mu.Unlock()
	if _, sensitive := b.pathAllowed(host, u.EscapedPath()); sensitive && !confirmed {
		b.emit(Event{Type: "policy.decision", Domain: host, Detail: map[string]any{"tool": tool, "class": ClassRead, "decision": "paused", "reason": "sensitive_page"}})
		if !b.pauseFor(ctx, PauseRequest{Reason: "sensitive_page", Question: "The manifest marks this page sensitive: the owner decides whether the run goes on.", URL: traceURL(state.URL), Domain: host}, nil) {
			return textResult("This page is marked sensitive and the owner did not let the run go on. Stop now.", true)
		}
		return textResult("The owner let the run go on from this sensitive page. Take a browser_snapshot.", false)
	}
	return b.passOn(res)
}

// afterClick checks whether an allowed action moved the page; if so it is a page change.
func (b *Bridge) afterClick(ctx context.Context, tool string, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res.IsError {
		return b.passOn(res)
	}
	state := b.inspect(ctx)
	b.mu.Lock()
	last := b.lastURL
	b.mu.Unlock()
	if state == nil {
		b.mu.Lock()
		b.refs.invalidate()
		b.mu.Unlock()
		return textResult(textOf(res)+"\n(The page could not be inspected afterwards; take a browser_snapshot.)", false)
	}
	if state.URL != last {
		return b.afterMove(ctx, tool, res)
	}
	return b.passOn(res)
}

// target resolves the ref argument against the latest snapshot.
func (b *Bridge) target(tool string, args map[string]any) (SnapNode, string) {
	ref := argStr(args, b.refName(tool))
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refs.lookup(ref)
}

func (b *Bridge) click(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	const tool = "browser_click"
	node, refusal := b.target(tool, args)
	if refusal != "" {
		return b.refuse(tool, ClassRead, "stale_ref", refusal, "")
	}
	element := argStr(args, "element")
	label := element
	if label == "" {
		label = node.Name
	}
	forward := map[string]any{"element": bound(label, 200), b.refName(tool): node.Ref}
	f := b.probe(ctx, node.Ref, label)
	if f == nil {
		return b.refuse(tool, ClassRead, "probe_failed", "That element could not be read from the page, so the click cannot be shown to be safe. Take a fresh browser_snapshot.", "")
	}
	if f.Unlocked && b.cfg.LockToken != "" {
		// a page of the owner's browser opened before the guard: it runs without the lock
		return b.refuse(tool, ClassRead, "lock_missing", "This page was open before the guard's submit lock was installed, so no click on it is safe. Open it again with browser_navigate, then take a browser_snapshot.", "")
	}
	inForm := f.InForm || f.Submits
	if (f.Submits && f.Method == "post") || isCommitLabel(f.Name, inForm) || isCommitLabel(node.Name, inForm) || isCommitLabel(element, inForm) || (f.ScriptSubs && f.InForm) {
		return b.submit(ctx, tool, forward)
	}
	if f.Href != "" {
		if _, _, r := checkURL(f.Href); r != "" && !strings.HasPrefix(f.Href, "#") {
			return b.refuse(tool, ClassRead, "bad_url", "That link is not an http(s) page: "+r, "")
		}
		if b.carriesTyped(f.Href) {
			return b.refuseByGet(tool, hostOf(f.Href))
		}
	}
	if f.Submits && f.Method == "get" && b.carriesTyped(f.GetURL) {
		return b.refuseByGet(tool, hostOf(f.GetURL))
	}
	if su, sh := b.sensitiveTarget(f); su != nil && !b.confirmSensitive(ctx, tool, su, sh) {
		return textResult("That opens a page marked sensitive and the owner did not let the run open it. Stop now.", true)
	}
	if f.NewTab {
		return b.refuse(tool, ClassRead, "new_tab", "That link opens a new tab, which an application run may not use. Open it with browser_navigate if it is on this application's sites.", "")
	}
	if in(fieldRoles, node.Role) {
		if (node.Role == "checkbox" || node.Role == "switch" || node.Role == "menuitemcheckbox") && (isConsentLabel(node.Name) || isConsentLabel(f.Name)) {
			return b.consent(ctx, tool, node, f)
		}
		g, r := GroundValue(node.Name, argStr(args, "source_quote"), f.Group, b.sources())
		if r != "" {
			return b.refuseField(tool, "ungrounded", r, fieldLabel(node, f))
		}
		label := fieldLabel(node, f)
		if res := b.confirmWeak(ctx, tool, firstNonEmpty(f.Group, label), label, g); res != nil {
			return res
		}
		return b.clickChecked(ctx, tool, node, label, forward, &g, label)
	}
	isNav := in(navRoles, node.Role) || (node.Role == "button" && isPaginationLabel(node.Name))
	stepGet := f.Submits && f.Method != "post" && isStepLabel(firstNonEmpty(node.Name, f.Name))
	if isNav || stepGet {
		if b.pageLimitReached() {
			return b.refuse(tool, ClassRead, "limit_pages", "The run's limit of "+strconv.Itoa(b.app.Limits.Pages)+" pages is reached. Call ready_for_review now.", "")
		}
		b.allow(tool, ClassRead, "")
		return b.clickChecked(ctx, tool, node, label, forward, nil, "")
	}
	fileInput := f.Tag == "input" && f.Type == "file"
	step := (node.Role == "button" || f.Tag == "button") && isStepLabel(firstNonEmpty(node.Name, f.Name)) && !f.Submits
	focus := in(focusRoles, node.Role) && !f.Submits
	if fileInput || step || focus {
		b.allow(tool, ClassFill, "")
		return b.clickChecked(ctx, tool, node, label, forward, nil, "")
	}
	// A button that submits no POST form, runs no inline submit and has no commit word in
	// its own name ("Apply" on a listing, "Autofill with ...") is a read: whatever it opens
	// is checked as a page change, and a script POST it starts meets the submit lock.
	isButton := node.Role == "button" || f.Tag == "button" || (f.Tag == "input" && (f.Type == "button" || f.Type == "submit"))
	if isButton && !(f.Submits && f.Method == "post") && !f.ScriptSubs && f.Type != "reset" {
		if b.pageLimitReached() {
			return b.refuse(tool, ClassRead, "limit_pages", "The run's limit of "+strconv.Itoa(b.app.Limits.Pages)+" pages is reached. Call ready_for_review now.", "")
		}
		b.allow(tool, ClassRead, "button_no_submit")
		return b.clickChecked(ctx, tool, node, label, forward, nil, "")
	}
	return b.refuse(tool, ClassRead, "not_allowed_control", "\""+bound(firstNonEmpty(node.Name, node.Role), 80)+"\" is not a control an application run may press. Links, form-step buttons (Next, Upload, Add) and answers are allowed.", "")
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if strings.TrimSpace(x) != "" {
			return x
		}
	}
	return ""
}

// fieldLabel is the label a fill is traced under: the field's accessible name in the
// snapshot, else the name the page gives it (the probe's); page text, never the agent's
// words (its "element" argument may hold anything).
func fieldLabel(node SnapNode, f *facts) string {
	if strings.TrimSpace(node.Name) != "" || f == nil {
		return node.Name
	}
	return f.Name
}

// confirmWeak handles a weak grounding (GroundResult.Weak: the field's label and the key of
// the quoted value share no meaning). Under grounding mode strict the owner is asked first
// (a screening_ambiguity pause naming the field and the key, never the value); resumed, the
// fill goes on (nil); cancelled, the run stops and the refusal is returned. Under lenient,
// or when the grounding is not weak, it returns nil (the fill is traced basis "weak").
func (b *Bridge) confirmWeak(ctx context.Context, tool, field, label string, g GroundResult) *mcp.CallToolResult {
	if !g.Weak || b.app.Grounding.Mode != GroundingStrict {
		return nil
	}
	d := map[string]any{"tool": tool, "class": ClassFill, "decision": "paused", "reason": "weak_grounding", "basis": "weak"}
	if label != "" {
		d["field"] = label
	}
	b.emit(Event{Type: "policy.decision", Detail: d})
	q := "Confirm the answer for \"" + bound(field, 120) + "\": the agent took it from the owner's \"" + bound(g.Key, 120) + "\", which may not answer this question."
	if !b.pauseFor(ctx, PauseRequest{Reason: "screening_ambiguity", Question: q}, nil) {
		return textResult("The owner did not confirm that answer. Stop now.", true)
	}
	return nil
}

// refuseField traces a refused fill of the field labelled label (class fill) and returns
// the refusal.
func (b *Bridge) refuseField(tool, code, msg, label string) *mcp.CallToolResult {
	d := map[string]any{"tool": tool, "class": ClassFill, "decision": "refused", "reason": code}
	if label != "" {
		d["field"] = label
	}
	b.emit(Event{Type: "policy.decision", Detail: d})
	return textResult(msg, true)
}

// fill forwards an answer and counts it; the field.filled event names the field (label,
// page text) and the kind of grounding source the value was quoted from (source).
func (b *Bridge) fill(ctx context.Context, tool, role, label string, g GroundResult, forward map[string]any) *mcp.CallToolResult {
	res := b.fillNoAfter(ctx, tool, role, label, g, forward)
	if res.IsError {
		return res
	}
	if tool == "browser_click" {
		return b.afterClick(ctx, tool, res)
	}
	return b.passOn(res)
}

// fillNoAfter is fill without the page-change check of a click (clickChecked does it after
// checking the form).
func (b *Bridge) fillNoAfter(ctx context.Context, tool, role, label string, g GroundResult, forward map[string]any) *mcp.CallToolResult {
	source := g.Kind
	if t, ok := forward["text"].(string); ok {
		b.pushTyped(ctx, t) // before typing: the page may send it on its input event
	} else if vs, ok := forward["values"].([]any); ok && len(vs) > 0 {
		t, _ := vs[0].(string)
		b.pushTyped(ctx, t)
	}
	res, msg, ok := b.callBrowser(ctx, tool, forward)
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		return b.passOn(res)
	}
	b.mu.Lock()
	b.filled++
	if len(b.typed) < 1000 {
		if t, ok := forward["text"].(string); ok {
			b.typed = append(b.typed, t)
		}
		if vs, ok := forward["values"].([]any); ok {
			for _, v := range vs {
				if t, ok := v.(string); ok {
					b.typed = append(b.typed, t)
				}
			}
		}
	}
	b.mu.Unlock()
	d := map[string]any{"tool": tool, "class": ClassFill, "role": role}
	if label != "" {
		d["field"] = label
	}
	if source != "" {
		d["source"] = source
	}
	if g.Weak {
		d["basis"] = "weak"
	} else if source != "" {
		d["basis"] = "value"
	}
	b.emit(Event{Type: "field.filled", Detail: d})
	return res
}

func (b *Bridge) typeText(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	const tool = "browser_type"
	node, refusal := b.target(tool, args)
	if refusal != "" {
		return b.refuse(tool, ClassFill, "stale_ref", refusal, "")
	}
	if !in(typeRoles, node.Role) {
		return b.refuse(tool, ClassFill, "not_a_text_field", "Type only into a text field (textbox, searchbox, combobox, spinbutton) from the latest browser_snapshot.", "")
	}
	if v, _ := args["submit"].(bool); v {
		return b.refuse(tool, ClassSubmit, "type_submit", "Typing may not submit the form (submit: true is refused).", "")
	}
	f := b.probe(ctx, node.Ref, firstNonEmpty(argStr(args, "element"), node.Name))
	if f == nil {
		return b.refuse(tool, ClassFill, "probe_failed", "That field could not be read from the page. Take a fresh browser_snapshot.", "")
	}
	if isCredentialLabel(node.Name) || isCredentialLabel(f.Name) || f.Type == "password" {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassFill, "decision": "paused", "reason": "login_required"}})
		return b.signIn(ctx, tool, node, f)
	}
	value := argStr(args, "text")
	label := fieldLabel(node, f)
	g, r := GroundValue(value, argStr(args, "source_quote"), label, b.sources())
	if r != "" {
		return b.refuseField(tool, "ungrounded", r, label)
	}
	if res := b.confirmWeak(ctx, tool, label, label, g); res != nil {
		return res
	}
	forward := map[string]any{"element": bound(firstNonEmpty(argStr(args, "element"), node.Name), 200), b.refName(tool): node.Ref, "text": value}
	return b.fill(ctx, tool, node.Role, label, g, forward)
}

func (b *Bridge) selectOption(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	const tool = "browser_select_option"
	node, refusal := b.target(tool, args)
	if refusal != "" {
		return b.refuse(tool, ClassFill, "stale_ref", refusal, "")
	}
	if !in(selectRoles, node.Role) {
		return b.refuse(tool, ClassFill, "not_a_select", "Select only in a dropdown (combobox or listbox) from the latest browser_snapshot.", "")
	}
	values := argStrings(args, "values")
	if len(values) == 0 {
		return b.refuse(tool, ClassFill, "bad_arguments", "values needs at least one value.", "")
	}
	f := b.probe(ctx, node.Ref, firstNonEmpty(argStr(args, "element"), node.Name))
	if f == nil {
		return b.refuse(tool, ClassFill, "probe_failed", "That dropdown could not be read from the page. Take a fresh browser_snapshot.", "")
	}
	if f.ScriptSubs && f.InForm {
		return b.refuse(tool, ClassSubmit, "auto_submit_control", "Changing that dropdown submits the form, so the run may not change it. Call request_answer so the owner sets it.", "")
	}
	label := fieldLabel(node, f)
	// An option is grounded by the label the page shows, never by its value attribute (a
	// value "7" may read "EUR 150,000"); the label is what is selected.
	var g GroundResult
	labels := make([]any, 0, len(values))
	for _, v := range values {
		shown := v
		if f.Tag == "select" {
			found := false
			for _, o := range f.Options {
				if o.Label == strings.TrimSpace(v) {
					shown, found = o.Label, true
					break
				}
			}
			for _, o := range f.Options {
				if !found && o.Value == v {
					shown, found = o.Label, true
				}
			}
			if !found {
				return b.refuseField(tool, "no_such_option", "That dropdown has no option "+strconv.Quote(bound(v, 80))+". Use an option's label as the snapshot shows it.", label)
			}
		}
		gv, r := GroundValue(shown, argStr(args, "source_quote"), label, b.sources())
		if r != "" {
			if shown != v {
				r = "The option " + strconv.Quote(bound(v, 80)) + " reads " + strconv.Quote(bound(shown, 120)) + " on the page, and that label is what must come from the owner's words. " + r
			}
			return b.refuseField(tool, "ungrounded", r, label)
		}
		if gv.Weak || g.Kind == "" {
			g = gv
		}
		labels = append(labels, shown)
	}
	if res := b.confirmWeak(ctx, tool, label, label, g); res != nil {
		return res
	}
	forward := map[string]any{"element": bound(firstNonEmpty(argStr(args, "element"), node.Name), 200), b.refName(tool): node.Ref, "values": labels}
	res := b.fill(ctx, tool, node.Role, label, g, forward)
	if res.IsError {
		return res
	}
	return b.afterClick(ctx, tool, res)
}

// formValueJS is shared by formSnapJS and formCheckJS: the value of a form control as a
// comparable string (selected options, checked, file count, or the value).
const formValueJS = `const val = (el) => {
    const t = String(el.type || "").toLowerCase();
    if (el.tagName === "SELECT") return Array.from(el.options).map((o) => (o.selected ? "1" : "0")).join("");
    if (t === "checkbox" || t === "radio") return el.checked ? "1" : "0";
    if (t === "file") return String(el.files ? el.files.length : 0);
    return String(el.value);
  };`

// formSnapJS keeps, in the page, the value of every form control (at most 2000) before a
// key press, and reports whether the focused element bears a value (a text field, select,
// radio, checkbox, range ...). The values stay in the page; only the count comes back.
const formSnapJS = `() => {
  ` + formValueJS + `
  const els = Array.from(document.querySelectorAll("input, select, textarea")).slice(0, 2000);
  Object.defineProperty(window, "__pabFormSnap", { value: { els, vals: els.map(val) }, configurable: true, writable: true, enumerable: false });
  const a = document.activeElement;
  const t = a ? String(a.type || "").toLowerCase() : "";
  const bears = !!a && (a.tagName === "SELECT" || a.tagName === "TEXTAREA" || a.isContentEditable ||
    (a.tagName === "INPUT" && !["button", "submit", "reset", "image", "hidden"].includes(t)));
  return { focusedValueBearing: bears, count: els.length, origin: performance.timeOrigin };
}`

// formCheckJS compares every form control with formSnapJS's (or formSnapClickJS's) values
// after a key press or a click, puts back each changed one that is not the click's own (with input and change events, so page frameworks see it) and
// returns the labels of those it put back (never their values).
const formCheckJS = `() => {
  ` + formValueJS + `
  const snap = window.__pabFormSnap;
  if (!snap) return { changed: [], missing: true, origin: performance.timeOrigin };
  window.__pabFormSnap = undefined;
  const s = (v) => (typeof v === "string" ? v : "").replace(/\s+/g, " ").trim().slice(0, 200);
  // a label's own words: a label wrapping its control holds the control's text too (a select's options)
  const own = (l) => { const c = l.cloneNode(true); c.querySelectorAll("select, input, textarea, option").forEach((x) => x.remove()); return c.textContent; };
  const label = (el) => s(el.getAttribute("aria-label")) || s(el.labels && el.labels.length ? Array.from(el.labels).map(own).join(" ") : "") ||
    s(el.getAttribute("placeholder")) || s(el.getAttribute("name")) || s(el.id) || el.tagName.toLowerCase();
  const changed = [];
  const restore = (el, old) => {
    const t = String(el.type || "").toLowerCase();
    if (el.tagName === "SELECT") Array.from(el.options).forEach((o, i) => { o.selected = old[i] === "1"; });
    else if (t === "checkbox" || t === "radio") el.checked = old === "1";
    else if (t !== "file") { const d = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), "value"); if (d && d.set) d.set.call(el, old); else el.value = old; }
    el.dispatchEvent(new Event("input", { bubbles: true }));
    el.dispatchEvent(new Event("change", { bubbles: true }));
  };
  snap.els.forEach((el, i) => {
    if (!el.isConnected || val(el) === snap.vals[i] || (snap.own && snap.own.has(el))) return;
    changed.push({ el, old: snap.vals[i] });
  });
  changed.forEach((c) => restore(c.el, c.old));
  return { changed: changed.slice(0, 20).map((c) => label(c.el)) };
}`

// pressKey presses a safe key. The values of the page's form controls are read before and
// after: a key on a focused value-bearing control is a fill (traced class fill), and any
// control a key changed is put back and traced policy.decision refused "fill.unjustified"
// with the control's label (never the value): a key press has no grounding, so it may set
// no value (an arrow on a select or a radio group, a Tab onto a consent radio ...).
func (b *Bridge) pressKey(ctx context.Context, key string) *mcp.CallToolResult {
	const tool = "browser_press_key"
	if !isSafeKey(key) {
		return b.refuse(tool, ClassSubmit, "unsafe_key", "That key is refused: only Tab, Shift+Tab, arrows, Escape, Home/End and PageUp/PageDown move between fields. Enter and Space can submit; type text with browser_type.", "")
	}
	b.mu.Lock()
	_, canCheck := b.child["browser_evaluate"]
	b.mu.Unlock()
	class := ClassRead
	if canCheck {
		before, ok := b.evalJSON(ctx, formSnapJS)
		if !ok {
			return b.refuse(tool, ClassRead, "inspect_failed", "The page's form could not be read, so the key press cannot be shown to be safe. Take a browser_snapshot.", "")
		}
		b.setSnapOrigin(before)
		if v, _ := before["focusedValueBearing"].(bool); v && key != "Tab" && key != "Shift+Tab" && key != "Escape" {
			class = ClassFill
		}
	}
	b.allow(tool, class, "")
	res, msg, ok := b.callBrowser(ctx, tool, map[string]any{"key": key})
	if !ok {
		return textResult(msg, true)
	}
	if canCheck {
		if labels := b.formCheck(ctx, tool); len(labels) > 0 {
			return textResult("That key changed the value of "+bound(strings.Join(labels, "; "), 400)+", and the change was undone: a key press may not set an answer. Answer with browser_click, browser_select_option or browser_type and a source_quote. Take a browser_snapshot.", true)
		}
	}
	return b.afterClick(ctx, tool, res)
}

// evalJSON runs fn in the page through the child's browser_evaluate and returns its JSON
// object value; false when it failed or returned no object.
func (b *Bridge) evalJSON(ctx context.Context, fn string) (map[string]any, bool) {
	res, err := b.cfg.Browser.CallTool(ctx, "browser_evaluate", map[string]any{"function": fn})
	if err != nil || res == nil || res.IsError {
		return nil, false
	}
	return evaluateResult(textOf(res))
}

func (b *Bridge) upload(ctx context.Context, kind string) *mcp.CallToolResult {
	const tool = "upload_artifact"
	b.mu.Lock()
	done := slices.Contains(b.uploaded, kind)
	b.mu.Unlock()
	if done {
		return b.refuse(tool, ClassFill, "already_uploaded", "The "+strings.ReplaceAll(kind, "_", " ")+" is already attached; it is never attached twice.", "")
	}
	path, sum, err := b.app.ArtifactFile(kind)
	if err != nil {
		if errors.Is(err, ErrArtifactChanged) {
			b.mu.Lock()
			b.blocked = &block{reason: "artifact_changed", questions: []string{"The approved " + strings.ReplaceAll(kind, "_", " ") + " changed after it was approved."}}
			b.stopped = true
			b.stopNote = "Stopped: an approved artifact changed."
			b.mu.Unlock()
			return b.refuse(tool, ClassFill, "artifact_changed", err.Error()+". Nothing was attached. Stop now.", "")
		}
		return b.refuse(tool, ClassFill, "artifact_unavailable", err.Error()+".", "")
	}
	if b.cfg.UploadDir != "" {
		staged, err := stageArtifact(path, sum, filepath.Join(b.cfg.UploadDir, "artifacts", kind))
		if err != nil {
			return b.refuse(tool, ClassFill, "artifact_unavailable", "The approved "+strings.ReplaceAll(kind, "_", " ")+" could not be prepared for upload ("+bound(err.Error(), 300)+"). Nothing was attached.", "")
		}
		path = staged
	}
	res, msg, ok := b.callBrowser(ctx, "browser_file_upload", map[string]any{"paths": []any{path}})
	if !ok {
		return textResult(msg, true)
	}
	if res.IsError {
		t := textOf(res)
		if strings.Contains(strings.ToLower(t), "modal state") || strings.Contains(strings.ToLower(t), "file chooser") {
			return b.refuse(tool, ClassFill, "no_file_chooser", "No file chooser is open. Click the field's upload control first, then call upload_artifact.", "")
		}
		return textResult(capText(t), true)
	}
	b.mu.Lock()
	b.uploaded = append(b.uploaded, kind)
	b.mu.Unlock()
	b.emit(Event{Type: "artifact.uploaded", Detail: map[string]any{"kind": kind, "sha256": sum, "class": ClassFill}})
	return textResult("Attached the approved "+strings.ReplaceAll(kind, "_", " ")+".", false)
}

// stageArtifact copies the file at path into dir (created 0700) under its own base name,
// from the bytes it reads and checks against sum, so the copy is exactly the approved file.
// Errors: unreadable, over MaxArtifactBytes, a hash that differs, or a failed write.
func stageArtifact(path, sum, dir string) (string, error) {
	f, err := openRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxArtifactBytes+1))
	if err != nil {
		return "", err
	}
	if len(data) > MaxArtifactBytes {
		return "", fmt.Errorf("larger than %d bytes", MaxArtifactBytes)
	}
	h := sha256.Sum256(data)
	if hex.EncodeToString(h[:]) != sum {
		return "", fmt.Errorf("%w: it changed while it was being read", ErrArtifactChanged)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	out := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(out, data, 0o600); err != nil {
		return "", err
	}
	return out, nil
}

func (b *Bridge) requestAnswer(ctx context.Context, args map[string]any) *mcp.CallToolResult {
	question := boundChars(strings.TrimSpace(argStr(args, "question")), capQuestionChar)
	if question == "" {
		return b.refuse("request_answer", ClassRead, "bad_arguments", "request_answer needs the question.", "")
	}
	b.mu.Lock()
	progress := b.filled + len(b.uploaded) + b.pages
	if progress != b.askProgress {
		b.askStreak = 0
	}
	b.askProgress = progress
	b.askStreak++
	b.asks++
	streak, asks := b.askStreak, b.asks
	full := len(b.extraSources)+len(b.app.Grounding.Answers) >= capAnswers
	b.mu.Unlock()
	switch {
	case asks > capQuestions:
		return b.refuse("request_answer", ClassRead, "too_many_questions", "This run has asked the owner "+strconv.Itoa(capQuestions)+" questions, the most it may. Fill what the sources cover, then call ready_for_review.", "")
	case streak > maxAsksWithoutProgress:
		return b.refuse("request_answer", ClassRead, "no_progress", "You asked the owner "+strconv.Itoa(maxAsksWithoutProgress)+" questions in a row without filling anything in between. Use the answers you have (take a browser_snapshot and fill the fields), or call ready_for_review.", "")
	case full:
		return b.refuse("request_answer", ClassRead, "too_many_answers", "The owner has given "+strconv.Itoa(capAnswers)+" answers, the most a run keeps. Fill what the sources cover, then call ready_for_review.", "")
	}
	reason := "missing_answer"
	if argStr(args, "kind") == "screening_ambiguity" {
		reason = "screening_ambiguity"
	}
	b.mu.Lock()
	before := len(b.extraSources)
	b.mu.Unlock()
	if !b.pauseFor(ctx, PauseRequest{Reason: reason, Question: question}, nil) {
		return textResult("Nobody answered. Do not guess. Stop now.", true)
	}
	b.mu.Lock()
	after := len(b.extraSources)
	b.mu.Unlock()
	if after == before {
		return textResult("The owner resumed without answering: leave that field empty and continue with the others.", false)
	}
	return textResult("The owner answered. The answer is now one of your sources: quote it as source_quote. Take a browser_snapshot and continue.", false)
}

func (b *Bridge) review(summary string) *mcp.CallToolResult {
	b.mu.Lock()
	b.reviewReady = true
	if b.summary == "" {
		b.summary = boundChars(strings.TrimSpace(summary), capSummary)
	}
	filled := b.filled
	b.mu.Unlock()
	b.emit(Event{Type: "review.ready", Detail: map[string]any{"class": ClassReview, "count": filled}})
	return textResult("Recorded. The application waits for the owner's review; nothing was submitted. Stop now.", false)
}

// lock arms (on) or disarms the page's submit lock (SubmitLockScript), when one is installed.
func (b *Bridge) lock(ctx context.Context, on bool) {
	if b.cfg.LockToken == "" {
		return
	}
	fn := "() => typeof window.__pabGuardLock === \"function\" && window.__pabGuardLock(\"" + b.cfg.LockToken + "\", " + strconv.FormatBool(on) + ")"
	_, _, _ = b.callBrowser(ctx, "browser_evaluate", map[string]any{"function": fn})
}

// submit is the final Submit: never under fill_and_review; once, gated and traced, under
// auto_submit.
func (b *Bridge) submit(ctx context.Context, tool string, forward map[string]any) *mcp.CallToolResult {
	gate := b.app.Gate
	if b.app.Mode != "auto_submit" || gate == "" {
		b.emit(Event{Type: "policy.decision", Detail: map[string]any{"tool": tool, "class": ClassSubmit, "decision": "refused", "reason": "fill_and_review"}})
		b.review("Stopped at the final submit: this run fills the form and waits for review.")
		return textResult("That control submits the application, and this run is fill-and-review: it was NOT pressed. The application waits for the owner's review. Stop now.", false)
	}
	before := b.inspect(ctx)
	if before == nil {
		return b.refuse(tool, ClassSubmit, "inspect_failed", "The page could not be read, so the submit cannot be shown to be safe. Take a fresh browser_snapshot.", "")
	}
	host := hostOf(before.URL)
	if blocker := blockerOf(before); blocker != "" {
		b.mu.Lock()
		b.blocked = &block{reason: blocker, questions: []string{}}
		b.mu.Unlock()
		b.emit(Event{Type: "browser.blocked", URL: before.URL, Domain: host, Detail: map[string]any{"reason": blocker}})
		return b.refuse(tool, ClassSubmit, blocker, "The page shows a blocker ("+strings.ReplaceAll(blocker, "_", " ")+"); nothing was submitted.", host)
	}
	if host == "" || !b.app.AllowsHost(host) {
		return b.refuse(tool, ClassSubmit, "external_site", "This page is not on one of this application's sites; nothing was submitted.", host)
	}
	b.mu.Lock()
	b.submitAttempted = true
	b.mu.Unlock()
	b.emit(Event{Type: "submit.attempted", URL: before.URL, Domain: host, Detail: map[string]any{"class": ClassSubmit, "gateId": gate, "tool": tool}})
	b.lock(ctx, true)
	res, _, ok := b.callBrowser(ctx, tool, forward)
	if ok && !res.IsError {
		_, _, _ = b.callBrowser(ctx, "browser_wait_for", map[string]any{"time": 2})
	}
	b.lock(ctx, false)
	var after *pageState
	if ok && !res.IsError {
		after = b.inspect(ctx)
	}
	b.mu.Lock()
	b.refs.invalidate()
	b.mu.Unlock()
	if after != nil && after.Confirmed {
		if ah := hostOf(after.URL); ah != "" && b.app.AllowsHost(ah) {
			at := b.now().UTC().Format(time.RFC3339)
			b.mu.Lock()
			b.submitted = &Submitted{URL: traceURL(after.URL), At: at, GateID: gate}
			b.lastURL = after.URL
			b.mu.Unlock()
			b.emit(Event{Type: "submit.confirmed", URL: after.URL, Domain: ah, Detail: map[string]any{"gateId": gate}})
			return textResult("Submitted, and the site confirmed it. Stop now.", false)
		}
	}
	e := Event{Type: "submit.unconfirmed", Domain: host, Detail: map[string]any{"gateId": gate}}
	if after != nil {
		e.URL = after.URL
	}
	b.emit(e)
	return textResult("The submit was pressed but no confirmation was seen. Do not press it again. Stop now.", true)
}
