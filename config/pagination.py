"""The page-numbered lists of every app's API."""

from rest_framework import pagination


class Page(pagination.PageNumberPagination):
    """50 rows a page; `page_size` up to 500."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
