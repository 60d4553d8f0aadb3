// Photos in memories: pick, drop or paste photos into a memory form (with previews and
// upload progress), and a simple gallery on pages that show photos (keyboard and swipe).
// Everything is delegated from document, so forms swapped in by htmx work the same.
(function () {
  "use strict";

  // --- the picker ------------------------------------------------------------------
  function inputOf(element) {
    var scope = element.closest("form") || element.closest("[data-photo-drop]");
    return scope ? scope.querySelector("input[data-photo-input]") : null;
  }

  function setFiles(input, files) {
    var transfer = new DataTransfer();
    files.forEach(function (file) { transfer.items.add(file); });
    input.files = transfer.files;
    renderPreviews(input);
  }

  function addFiles(input, added) {
    var images = Array.prototype.filter.call(added, function (file) {
      return !file.type || file.type.indexOf("image/") === 0 || /\.(heic|heif)$/i.test(file.name);
    });
    if (!images.length) return;
    setFiles(input, Array.prototype.slice.call(input.files).concat(images));
  }

  function renderPreviews(input) {
    var drop = input.closest("[data-photo-drop]");
    var list = drop && drop.querySelector("[data-photo-previews]");
    if (!list) return;
    list.textContent = "";
    Array.prototype.forEach.call(input.files, function (file, index) {
      var item = document.createElement("li");
      if (/^image\/(jpeg|png|webp|gif)$/.test(file.type)) {
        // A data: URL (the page's policy allows data: images, not blob:).
        var img = document.createElement("img");
        img.alt = "";
        var reader = new FileReader();
        reader.addEventListener("load", function () { img.src = reader.result; });
        reader.readAsDataURL(file);
        item.appendChild(img);
      } else {
        var blank = document.createElement("span");
        blank.className = "photo-preview-blank";
        blank.textContent = file.name.split(".").pop().toUpperCase();
        item.appendChild(blank);
      }
      var name = document.createElement("span");
      name.className = "photo-preview-name";
      name.textContent = file.name;
      item.appendChild(name);
      var remove = document.createElement("button");
      remove.type = "button";
      remove.className = "photo-preview-remove";
      remove.setAttribute("aria-label", "Remove " + file.name);
      remove.textContent = "×";
      remove.addEventListener("click", function () {
        var kept = Array.prototype.slice.call(input.files);
        kept.splice(index, 1);
        setFiles(input, kept);
      });
      item.appendChild(remove);
      list.appendChild(item);
    });
    drop.classList.toggle("has-photos", input.files.length > 0);
  }

  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("input[data-photo-input]")) renderPreviews(event.target);
  });

  document.addEventListener("dragover", function (event) {
    var drop = event.target.closest && event.target.closest("form");
    if (!drop || !inputOf(drop)) return;
    event.preventDefault();
    var zone = drop.querySelector("[data-photo-drop]");
    if (zone) zone.classList.add("is-dragging");
  });
  document.addEventListener("dragleave", function (event) {
    var zone = event.target.closest && event.target.closest("[data-photo-drop]");
    if (zone) zone.classList.remove("is-dragging");
  });
  document.addEventListener("drop", function (event) {
    var form = event.target.closest && event.target.closest("form");
    var input = form && inputOf(form);
    if (!input || !event.dataTransfer || !event.dataTransfer.files.length) return;
    event.preventDefault();
    var zone = form.querySelector("[data-photo-drop]");
    if (zone) zone.classList.remove("is-dragging");
    addFiles(input, event.dataTransfer.files);
  });
  document.addEventListener("paste", function (event) {
    var form = event.target.closest && event.target.closest("form");
    var input = form && inputOf(form);
    if (!input || !event.clipboardData || !event.clipboardData.files.length) return;
    event.preventDefault();
    addFiles(input, event.clipboardData.files);
  });

  // --- upload progress ---------------------------------------------------------------
  function progressOf(form) { return form.querySelector("[data-photo-progress]"); }
  function hasPhotos(form) {
    var input = inputOf(form);
    return input && input.files.length > 0;
  }
  function showProgress(form, loaded, total) {
    var bar = progressOf(form);
    if (!bar) return;
    bar.hidden = false;
    bar.value = total ? Math.round((loaded / total) * 100) : 0;
    bar.textContent = bar.value + "%";
  }
  // htmx forms (quick capture): htmx reports the upload's progress.
  document.addEventListener("htmx:xhr:progress", function (event) {
    var form = event.target.closest && event.target.closest("form");
    if (form && hasPhotos(form) && event.detail.lengthComputable) showProgress(form, event.detail.loaded, event.detail.total);
  });
  // Plain forms (the edit page): send with XMLHttpRequest to see the progress, then show
  // where the server sent us, exactly as a normal submit would.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (event.defaultPrevented || form.hasAttribute("hx-post") || !progressOf(form) || !hasPhotos(form)) return;
    event.preventDefault();
    var data = new FormData(form);
    if (event.submitter && event.submitter.name) data.append(event.submitter.name, event.submitter.value);
    var request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.upload.addEventListener("progress", function (progress) {
      if (progress.lengthComputable) showProgress(form, progress.loaded, progress.total);
    });
    request.addEventListener("load", function () {
      if (request.responseURL && request.responseURL !== form.action) {
        window.location.assign(request.responseURL);
      } else {
        document.open();
        document.write(request.responseText);
        document.close();
      }
    });
    request.addEventListener("error", function () {
      var bar = progressOf(form);
      if (bar) bar.hidden = true;
      form.submit();
    });
    request.send(data);
  });

  // --- the gallery -------------------------------------------------------------------
  var viewer = null;
  var items = [];
  var current = 0;
  var touchStart = null;

  function buildViewer() {
    viewer = document.createElement("dialog");
    viewer.className = "photo-viewer";
    viewer.setAttribute("aria-label", "Photo");
    viewer.innerHTML =
      '<figure><img alt=""><figcaption></figcaption></figure>' +
      '<p class="photo-viewer-count" aria-live="polite"></p>' +
      '<button type="button" class="photo-viewer-prev" aria-label="Previous photo">‹</button>' +
      '<button type="button" class="photo-viewer-next" aria-label="Next photo">›</button>' +
      '<button type="button" class="photo-viewer-close" aria-label="Close">×</button>';
    viewer.querySelector(".photo-viewer-prev").addEventListener("click", function () { show(current - 1); });
    viewer.querySelector(".photo-viewer-next").addEventListener("click", function () { show(current + 1); });
    viewer.querySelector(".photo-viewer-close").addEventListener("click", function () { viewer.close(); });
    viewer.addEventListener("click", function (event) { if (event.target === viewer) viewer.close(); });
    viewer.addEventListener("keydown", function (event) {
      if (event.key === "ArrowLeft") { event.preventDefault(); show(current - 1); }
      if (event.key === "ArrowRight") { event.preventDefault(); show(current + 1); }
    });
    viewer.addEventListener("touchstart", function (event) {
      touchStart = event.touches.length === 1 ? event.touches[0].clientX : null;
    }, { passive: true });
    viewer.addEventListener("touchend", function (event) {
      if (touchStart === null) return;
      var moved = event.changedTouches[0].clientX - touchStart;
      if (Math.abs(moved) > 40) show(current + (moved < 0 ? 1 : -1));
      touchStart = null;
    });
    document.body.appendChild(viewer);
  }

  function show(index) {
    if (!items.length) return;
    current = (index + items.length) % items.length;
    var link = items[current];
    var thumb = link.querySelector("img");
    var img = viewer.querySelector("img");
    img.src = link.href;
    img.alt = thumb ? thumb.alt : "";
    viewer.querySelector("figcaption").textContent = link.dataset.caption || "";
    viewer.querySelector(".photo-viewer-count").textContent = items.length > 1 ? (current + 1) + " / " + items.length : "";
    viewer.classList.toggle("is-single", items.length < 2);
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a[data-gallery-item]");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;
    var group = link.closest("[data-gallery], .photo-strip");
    if (!group || typeof HTMLDialogElement === "undefined") return;
    event.preventDefault();
    if (!viewer) buildViewer();
    items = Array.prototype.slice.call(group.querySelectorAll("a[data-gallery-item]"));
    show(items.indexOf(link));
    viewer.showModal();
  });
})();
