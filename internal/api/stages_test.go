package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/xdp5g/xdp5g/internal/config"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/upf/upfxdp"
)

// An interface of the copies role takes no traffic: the API refuses it
// stages in front of the UPF as the configuration does, and a start does
// not restore such stages saved before.
func TestCopiesInterfaceRunsTheUPFAlone(t *testing.T) {
	ifaces := []config.Interface{
		{Name: "n3", Roles: upfxdp.RoleAccess | upfxdp.RoleCore, Stages: []string{config.StageUPF}},
		{Name: "li", Roles: upfxdp.RoleCopies, Stages: []string{config.StageUPF}},
	}
	saved := []byte(`{"interfaces": [{"name": "li", "stages": ["classify", "upf"], "slice": 0, "configured": {"stages": ["upf"], "slice": 0}}]}`)
	running, restored, dropped, err := RestoreStages(ifaces, true, saved)
	if err != nil {
		t.Fatal(err)
	}
	if len(restored) != 0 || len(running[1].Stages) != 1 || len(dropped) != 1 || dropped[0] != "li" {
		t.Errorf("restored %v, dropped %v: li runs %v, want the UPF alone, its saved stages dropped", restored, dropped, running[1].Stages)
	}
	applied := 0
	s := NewStages(running, true, func(string, StageSet) error { applied++; return nil }, func() {})
	_, err = s.set("li", StageSet{Stages: []string{config.StageClassify, config.StageUPF}})
	var fe *fielderr.Error
	if !errors.As(err, &fe) || fe.Field != "stages" || applied != 0 {
		t.Errorf("classify on the copies interface: %v, applied %d times", err, applied)
	}
	if _, err := s.set("n3", StageSet{Stages: []string{config.StageClassify, config.StageUPF}}); err != nil || applied != 1 {
		t.Errorf("classify on n3: %v, applied %d times", err, applied)
	}
}

// A refused PUT of stages answers 400 naming the field and runs nothing:
// a key given twice, a slice of the wrong type or out of range, naming
// the slices there are.
func TestRefusedStagesChangeNothing(t *testing.T) {
	running, _, _, err := RestoreStages([]config.Interface{{Name: "n3", Roles: upfxdp.RoleAccess | upfxdp.RoleCore, Stages: []string{config.StageUPF}}}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	url := serveAPI(t, Services{Stages: NewStages(running, true, func(string, StageSet) error { applied++; return nil }, func() {})})
	for _, c := range []struct{ body, field, says string }{
		{`{"stages": ["upf"], "stages": ["classify", "upf"]}`, "stages", `"stages" is given twice`},
		{`{"stages": ["classify", "upf"], "slice": 1, "slice": 2}`, "slice", `"slice" is given twice`},
		{`{"stages": ["classify", "upf"], "slice": -1}`, "slice", "from 0 to 255"},
		{`{"stages": ["classify", "upf"], "slice": "1"}`, "slice", "from 0 to 255"},
		{`{"stages": ["classify", "upf"], "slice": 256}`, "slice", "0 to 255"},
	} {
		req, err := http.NewRequest("PUT", url+"/api/v1/interfaces/n3/stages", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got Error
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest || got.Field != c.field || !strings.Contains(got.Msg, c.says) {
			t.Errorf("%s: %d %+v, want 400 naming %s, saying %q", c.body, resp.StatusCode, got, c.field, c.says)
		}
	}
	if applied != 0 {
		t.Errorf("refused stages applied %d times", applied)
	}
}
