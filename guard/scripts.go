package guard

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"strconv"
	"strings"
)

// The page scripts the guard runs in the browser live in guard/js, one function per file,
// embedded here. A file ends in one newline, which is not part of the script (jsText).
// Three files hold the line "/* form-value.js */" where form-value.js's text is put
// (withFormValue); others hold "@NAME@" slots the guard fills with its own values.
var (
	//go:embed js/submit-lock.js
	submitLockFile string
	//go:embed js/probe-element.js
	probeElementFile string
	//go:embed js/inspect-page.js
	inspectPageFile string
	//go:embed js/form-value.js
	formValueFile string
	//go:embed js/form-snap.js
	formSnapFile string
	//go:embed js/form-check.js
	formCheckFile string
	//go:embed js/form-snap-click.js
	formSnapClickFile string
	//go:embed js/consent-state.js
	consentStateFile string
	//go:embed js/consent-tick.js
	consentTickFile string
	//go:embed js/credential-state.js
	credentialStateFile string
	//go:embed js/lock-arm.js
	lockArmFile string
	//go:embed js/lock-typed.js
	lockTypedFile string
	//go:embed js/forms.js
	formsFile string
)

// jsText is the script of an embedded file: its text without the final newline.
func jsText(file string) string { return strings.TrimSuffix(file, "\n") }

// withFormValue is the script of an embedded file with formValueJS put in place of its
// "/* form-value.js */" line.
func withFormValue(file string) string {
	return strings.Replace(jsText(file), "/* form-value.js */", formValueJS, 1)
}

var (
	// formsJS runs in the guard's isolated world (Config.Holds) of every frame: the forms of
	// the frame and its open shadow roots, as netpolicy.Form values (action, method, fields).
	formsJS = jsText(formsFile)

	// submitLockJS is the text of SubmitLockScript, with "@TOKEN@" for its token.
	submitLockJS = jsText(submitLockFile)

	// probeElementJS runs in the page through the child's browser_evaluate with the target ref
	// (never offered to the agent). It reports DOM facts about one control: whether activating it
	// submits a form, the form's method and action, and an accessible-ish name.
	probeElementJS = jsText(probeElementFile)

	// inspectPageJS reads the page's state: URL, title and the blockers the guard stops for.
	inspectPageJS = jsText(inspectPageFile)

	// formValueJS is shared by formSnapJS and formCheckJS: the value of a form control as a
	// comparable string (selected options, checked, file count, or the value).
	formValueJS = jsText(formValueFile)

	// formSnapJS keeps, in the page, the value of every form control (at most 2000) before a
	// key press, and reports whether the focused element bears a value (a text field, select,
	// radio, checkbox, range ...). The values stay in the page; only the count comes back.
	formSnapJS = withFormValue(formSnapFile)

	// formCheckJS compares every form control with formSnapJS's (or formSnapClickJS's) values
	// after a key press or a click, puts back each changed one that is not the click's own (with input and change events, so page frameworks see it) and
	// returns the labels of those it put back (never their values).
	formCheckJS = withFormValue(formCheckFile)

	// formSnapClickJS is formSnapJS for a click on el: the values of the page's form controls
	// (hidden inputs aside: a page's own bookkeeping, not an answer) are kept in the page; el
	// and, for a radio, the radios of its group are marked as the click's own (a grounded fill
	// of el may change them). The values stay in the page; only the count comes back.
	// "__PAB_OWN__" stands for true or false (clickSnap).
	formSnapClickJS = withFormValue(formSnapClickFile)

	// consentStateJS reads whether a consent control (the ref's element) is ticked: a checkbox's
	// checked, else aria-checked / aria-pressed.
	consentStateJS = jsText(consentStateFile)

	// consentTickJS ticks a consent control for the owner (a click on the element itself, so the
	// page's handlers run) unless it is ticked already, and reports the state after.
	consentTickJS = jsText(consentTickFile)

	// credentialStateJS reads whether a credential field (the ref's element) is still on the
	// page and whether it holds a value (never the value itself).
	credentialStateJS = jsText(credentialStateFile)
)

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

// lockArmCall is the script that arms (on) or disarms the page's submit lock with token.
func lockArmCall(token string, on bool) string {
	return strings.NewReplacer("@TOKEN@", token, "@ON@", strconv.FormatBool(on)).Replace(jsText(lockArmFile))
}

// lockTypedCall is the script that gives the page's submit lock (armed by token) the
// typed values' hashes, list (JSON: [[length, hash], ...]).
func lockTypedCall(token string, list []byte) string {
	return strings.NewReplacer("@TOKEN@", token, "@LIST@", string(list)).Replace(jsText(lockTypedFile))
}
